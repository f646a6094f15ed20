"""Data-parallel training of a small numpy model through the fabric's collectives: the model (mlp),
the data set's shards and batches (data), one step's local gradients and the update every rank
applies to the all-reduced sum (step), how a single process combines the ranks' vectors as the
switches or an exact sum would (combine), and one rank as a host process (`python -m
hostagent.training.dp_rank`)."""

"""The in-network aggregation backend on the host: the wire format the switches' aggregation
program speaks (protocol), the block-exponent quantisation of float32 (quantize), the worker that
streams a tensor through the switch (worker) and the aggregation core the parameter server shares
with the switch's contract (aggregator). The P4 side is p4src/include/control/aggregation.p4, the
job manager controller/aggregation."""

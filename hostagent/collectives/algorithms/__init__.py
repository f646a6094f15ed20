"""The algorithms of the process group, each over a links.Link: ring, double binary tree,
recursive halving-doubling, hierarchical and the pairwise exchanges (all_to_all, barrier)."""

"""What the cluster offers: Nodes as offers, their indexes, cluster profiles, placement."""

"""The benchmark's parts: each measures one path of the product and returns its figures."""

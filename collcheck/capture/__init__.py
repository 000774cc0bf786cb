"""Recording side: runs inside the training job; imports only stdlib, msgpack and torch."""

"""What collcheck knows of the code around a collective, kept once for every layer: whose code a
frame is (frames.py), which torch internal issued a collective (torch_internals/), what the
frameworks users write against were doing (frameworks/), and how each fix is worded (fixes.py).

Standard library only, and no state: the recorder inside the training job reads frames.py and
torch_internals/ as the analysis does.
"""

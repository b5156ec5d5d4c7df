"""Views draw data and never fetch it: `plots` (DataFrames and reports -> seaborn figures) and
`widgets` (live ipywidgets over a server's state)."""

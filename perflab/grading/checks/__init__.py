"""One module of checks per lab; the manifest names the function for each exercise."""

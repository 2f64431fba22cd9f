"""traindoc's core: settings, the typed answer, and the one ``ask()`` every front end calls."""

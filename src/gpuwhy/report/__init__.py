"""Reports of a diagnosis: the terminal (terminal, verdict, live line, watch, doctor), JSON, the
HTML page (html/) and the Perfetto export (perfetto/); the minimal summary when analysis fails."""

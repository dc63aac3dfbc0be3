"""The HTML report: one self-contained page (`page.write_html`) with the run's sections and a
zoomable timeline of every GPU under the job's phases."""

"""The base layer: what every other package may import, importing nothing of the project."""

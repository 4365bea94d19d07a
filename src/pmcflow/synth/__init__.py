"""Synthetic compound figures: source panels, layouts, labels, the compositor and the demo corpus."""

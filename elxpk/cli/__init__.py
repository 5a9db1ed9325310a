"""The Typer command tree. One thin module per command group; they parse flags and delegate."""

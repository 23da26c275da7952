"""Built-in views of the CPR, diners and games societies (filled in below)."""

"""The shared ground below every package: settings, the exception tree, secret masking.

Nothing here imports from agent/, corpus/, tools/, jobs/ or ui/; they all import from here."""

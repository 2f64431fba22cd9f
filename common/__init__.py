"""The shared ground below every package: settings, the exception tree, secret masking.

Nothing here imports from agent/, corpus/, tools/, jobs/ or the front ends (traindoc_cli/, traindoc_web/,
traindoc_slack/); they all import from here."""

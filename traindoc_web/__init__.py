"""The web front end, ``traindoc web``: the chat's handlers (chat.py), the Gradio app and its server (app.py), its
page, style and script (page.py), what the chat shows of a text made safe (markup.py), uploads and the history.

Like every front end it calls the same ``ask()`` (agent/core.py) and only renders its typed answer."""

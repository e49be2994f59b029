"""Browser viewer (viser): ``SceneViewer``. Optional: needs the ``viser`` package."""

"""rmqlab.lab: what sits around the notebooks in labs/ — running and stripping them
(`notebooks`), opening JupyterLab (`launcher`), and the exercises' checkers (`exercises`)."""

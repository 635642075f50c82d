"""`python -m executor`: the environment executor's HTTP server (see executor/server.py)."""

from executor.server import main

if __name__ == "__main__":
    main()

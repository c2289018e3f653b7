"""`python -m gpunet`: the same CLI as the `gpunet` script."""

from gpunet.cli.main import app

if __name__ == "__main__":
    app(prog_name="gpunet")

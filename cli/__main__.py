from evaltrace.cli.main import run

run()

from webhook.cli import run

run()

TITLE = "decode (not yet)"
def describe(ctx):
    return []
def run(ctx):
    return []

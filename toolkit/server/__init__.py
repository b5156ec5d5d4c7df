"""A server: what to launch (`spec`, pure), launching it (`launch`), its one state (`server`: the log
follower and the readiness tracker), waiting for it (`wait`), and checking its flags before launch
(`help_table`, pure, and `preflight`).
"""

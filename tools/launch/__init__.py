"""collective-launch's parts: a local cluster of daemons and trainer processes on one machine.

Modules: report (the launcher's name, messages, failures and exit statuses), children (a child
process, its output pipes and their forwarding), daemon (finding collectived, reading its control
address), netns (daemons inside network namespaces), launcher (one run: start, supervise, tear
down). Python 3 standard library only; the command line is tools/collective-launch.
"""

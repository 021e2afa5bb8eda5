"""One module per command, each with its parser (`add_parser(sub)`, in the option layer:
options.py) and its handler (`run(args)`, set as the parser's default); cli.py puts them
together in this order, which is their order in `flashbed --help`."""

from . import bench, crashstate, devices, filesystems, kernel, lab, probe, report, results, run, studies

COMMANDS = (kernel, lab, filesystems, devices, probe, studies, run, bench, crashstate, results, report)

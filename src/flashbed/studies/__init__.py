"""The published studies, one module each; STUDIES maps a name to its study."""

from .appcheck import AppCheck
from .appio import AppIO
from .badblocks import BadBlocks
from .bandwidth import Bandwidth
from .base import Study
from .bigfile import BigFile
from .boot import Boot
from .caps import Caps
from .corruption import Corruption
from .cpu import Cpu
from .crashstates import CrashStates
from .mixed import Mixed
from .mkfs import Mkfs
from .mount import Mount
from .overwrite import Overwrite
from .powercut import PowerCut
from .smallfiles import SmallFiles
from .sqlite import Sqlite
from .workload import Workload

# in each study's order: listings, plans and the report follow it
STUDIES: dict[str, Study] = {s.name: s for s in sorted((
    Bandwidth(), Mixed(), BigFile(), SmallFiles(), AppIO(), Overwrite(), Sqlite(), Mount(), Boot(), Mkfs(), Caps(),
    Cpu(), PowerCut(), CrashStates(), Corruption(), BadBlocks(), Workload(), AppCheck()), key=lambda s: s.order)}

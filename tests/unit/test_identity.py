"""A run's identity survives refactoring: the same request keeps its run id and its
cells' ids and file names, so `flashbed run` resumes runs made by older versions.
The ids below were computed by flashbed before the studies owned their parameters, when
every run was in real time: since auto became the default clock, such a request says
`--clock real` (clocks=REAL) to keep its id."""

from dataclasses import replace

from flashbed.plan import PlanRequest, make_plan

REAL = ("real",)  # the clock of every run before auto (lab/clock.py)

# what the default request (`flashbed run`, `make demo`) was before the quick profile gained the
# power-cut and corruption studies and the default filesystems the read-only images (issue 14):
# spelled out, it keeps its id, and its run resumes; the default request is a new plan, a new id
OLD_DEFAULT = dict(fs=("ext2", "ext3", "ext4", "ext4-nojournal", "btrfs", "xfs", "f2fs", "nilfs2", "vfat", "exfat"),
                   studies=("bandwidth", "mixed", "bigfile", "smallfiles", "appio", "overwrite", "mount", "boot",
                            "mkfs", "cpu"))

RUN_IDS = [
    (PlanRequest(fs=("ext4", "vfat"), devices=("emmc-8g@256M",), studies=("mkfs", "mount"), clocks=REAL),
     "quick-9a4460d7"),
    (PlanRequest(**OLD_DEFAULT, clocks=REAL), "quick-a7021a70"),
    # the paper profile's studies before it gained sqlite and caps (issue 18), spelled out: the same id
    (PlanRequest(profile="paper", fs=("ext4", "f2fs+tuned", "ext2@f2fs"), devices=("emmc-8g",),
                 studies=OLD_DEFAULT["studies"], clocks=REAL), "paper-17b37363"),
    (PlanRequest(fs=("ext4", "btrfs"), devices=("plain-file@512M",), studies=("powercut", "corruption", "badblocks"),
                 overrides={"powercut": {"iterations": 5}}, clocks=REAL), "quick-6dc1e75c"),
    (PlanRequest(fs=("ext4",), devices=("plain-file@512M",), studies=("bigfile", "powercut"),
                 overrides={"bigfile": {"size": 256 << 20}, "powercut": {"modes": "async", "cut_min": "0.7"}},
                 repeat=2, seed=5, pace="none", clocks=REAL), "quick-6bbcd03e"),
]


def test_same_request_same_run_id_as_before():
    for req, want in RUN_IDS:
        assert req.run_id() == want, req
        # the default clock (auto) is a new plan: a new id, so an old run is never finished in another clock
        auto = replace(req, clocks=("auto",))
        assert auto.run_id() != want and replace(req, clocks=()).run_id() == want


# the default request since issue 14 (power cuts, corruption, the read-only images), before the
# quick profile gained the sqlite, caps and crashstates studies (issue 18): spelled out, it keeps its id
ISSUE_14_DEFAULT = dict(fs=OLD_DEFAULT["fs"] + ("squashfs+zstd", "erofs+lz4"),
                        studies=OLD_DEFAULT["studies"] + ("powercut", "corruption"))


def test_the_default_request_since_issue_18():
    assert PlanRequest(**ISSUE_14_DEFAULT, clocks=REAL).run_id() == "quick-6e7d4c40"
    assert PlanRequest(clocks=REAL).run_id() == "quick-c15c358d"
    assert PlanRequest().run_id() != "quick-c15c358d"  # auto, the default clock since issue 17


def test_cells_keep_their_ids_and_file_names():
    # the corruption cases the quick profile had before it ran a short corruption study (issue 14)
    reference = {"modes": ["after", "alternate"], "features": ["corrupt", "drop"], "corrupt_after": 10,
                 "big_mb": 30, "many_count": 30}
    plan = make_plan(PlanRequest(fs=("ext4",), devices=("plain-file@512M",),
                                 studies=("mount", "powercut", "corruption", "badblocks"),
                                 overrides={"corruption": reference}))
    assert [c.key.file_name for c in plan.cells] == [
        "plain-file@512M__ext4__mount__fill0__r0.json", "plain-file@512M__ext4__mount__fill50__r0.json",
        "plain-file@512M__ext4__powercut__sync__r0.json", "plain-file@512M__ext4__powercut__async__r0.json",
        "plain-file@512M__ext4__corruption__after-10s_one-30MB__r0.json",
        "plain-file@512M__ext4__corruption__after-10s_many-1MB__r0.json",
        "plain-file@512M__ext4__corruption__1s-on-1s-off_one-30MB__r0.json",
        "plain-file@512M__ext4__corruption__1s-on-1s-off_many-1MB__r0.json",
        "plain-file@512M__ext4__corruption__after-10s_one-30MB_drop__r0.json",
        "plain-file@512M__ext4__corruption__after-10s_many-1MB_drop__r0.json",
        "plain-file@512M__ext4__corruption__1s-on-1s-off_one-30MB_drop__r0.json",
        "plain-file@512M__ext4__corruption__1s-on-1s-off_many-1MB_drop__r0.json",
        "plain-file@512M__ext4__badblocks__dust__r0.json"]
    raw = make_plan(PlanRequest(fs=("ubifs",), devices=("nand-2g-4k@128M",), studies=("badblocks",)))
    assert [c.key.id for c in raw.cells] == [f"nand-2g-4k@128M/ubifs/badblocks/{c}/r0"
                                             for c in ("badblocks", "weakblocks", "weakpages", "bitflips")]


def test_auto_pace_keeps_the_ids_of_requests_it_does_not_change():
    """--pace auto (the default since the studies declare whether they depend on timing) gives
    the failure studies' cells pace none. A request that comes out the same (no timing-free
    study, or no emulated device) keeps its id; one made before with the old default, real,
    keeps its id when it says --pace real; the others are new plans and get new ids."""
    mixed = dict(fs=("ext4", "f2fs"), devices=("emmc-8g@512M",), studies=("mkfs", "powercut"))
    failure = dict(mixed, studies=("powercut", "corruption"))
    # ids flashbed gave these requests before --pace auto (then: real pacing throughout)
    assert PlanRequest(**mixed, pace="real", clocks=REAL).run_id() == "quick-ff1dfa15"
    assert PlanRequest(**failure, pace="real", clocks=REAL).run_id() == "quick-5d00f171"
    assert PlanRequest(**mixed).run_id() not in ("quick-ff1dfa15", PlanRequest(**mixed, pace="none").run_id())
    # only timing-free studies: auto is none, the same cells as --pace none, the same run
    assert PlanRequest(**failure).run_id() == PlanRequest(**failure, pace="none").run_id()
    plan = make_plan(PlanRequest(**mixed))
    assert {(c.key.study, c.pace) for c in plan.cells} == {("mkfs", "real"), ("powercut", "none")}
    assert plan.request.pace == "auto"

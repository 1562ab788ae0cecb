"""What the labs state, checked against the labs' own outputs and against RocketMQ's behaviour.

Every test reads the committed notebooks (no cluster runs here), so it checks the text that students
read beside the outputs it talks about. The numbers are parsed from the outputs, never typed in
here: a re-executed notebook is checked the same way.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest

LABS = Path(__file__).resolve().parent.parent / "labs"
LAB01, LAB02, LAB03, LAB04 = (LABS / name for name in ("01-deployment-modes.ipynb", "02-raft-controller.ipynb",
                                                        "03-ha-handshake.ipynb", "04-log-truncation.ipynb"))
PLOTLY = "application/vnd.plotly.v1+json"


def cells(path: Path) -> list:
    return nbformat.read(path, as_version=4).cells


def text_of(cell) -> str:
    """A code cell's printed output (streams and text/plain), joined."""
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"])
        elif "text/plain" in o.get("data", {}):
            out.append(o["data"]["text/plain"])
    return "".join(out)


def markdown(path: Path) -> list[str]:
    return [c.source for c in cells(path) if c.cell_type == "markdown"]


def flat(s: str) -> str:
    """Whitespace folded, so a phrase matches across the notebook's line breaks."""
    return re.sub(r"\s+", " ", s)


def code_cell(path: Path, marker: str):
    found = [c for c in cells(path) if c.cell_type == "code" and marker in c.source]
    assert len(found) == 1, f"{path.name}: {len(found)} code cells contain {marker!r}"
    return found[0]


def next_markdown(path: Path, cell) -> str:
    cs = cells(path)
    i = next(k for k, c in enumerate(cs) if c.get("id") == cell.get("id"))
    return next(c.source for c in cs[i + 1:] if c.cell_type == "markdown")


# --- 1. lab 01: the classic restart hazard is RocketMQ's; the refusal is rmqlab's option -------------------
def test_lab01_shows_the_hazard_as_rocketmqs_and_labels_the_guard_as_rmqlabs():
    text = flat("\n".join(markdown(LAB01)))
    # RocketMQ's master takes a slave's report at its word: say so, with the classes that do it.
    assert "notifyTransferSome" in text and "DefaultHAConnection" in text
    # The refusal is an rmqlab option, and labelled as not RocketMQ's wherever it is named.
    assert "rmqlabRejectImpossibleHaReport" in text
    for sentence in re.split(r"(?<=[.:])\s", text):
        if re.search(r"refus|no sync send .* completes|can complete", sentence):
            assert "rmqlab" in sentence, f"a refusal presented without saying it is rmqlab's: {sentence!r}"
    # The cell that says what this run did agrees with its own numbers.
    out = text_of(code_cell(LAB01, "restart_hazard("))
    rows = re.findall(r"(\S+): broker-a restarted with its commit log ending at (\d+), (\d+) bytes behind "
                      r"broker-a-s \((\d+)\)\. After the restart broker-a acknowledged (no|\d+) send", out)
    assert {r[0] for r in rows} == {"2m-2s-sync", "2m-2s-async"}, out
    for mode, master_end, behind, slave_end, acked in rows:
        assert int(slave_end) - int(master_end) == int(behind) > 0
        # The lab runs RocketMQ's behaviour: both masters acknowledge sends their slave holds differently.
        assert acked != "no", f"{mode}: the run does not show the hazard the lab teaches: {out}"
    assert out.count("differ at the same offsets, and nothing reported it") == 2, out


# --- 2. lab 02: only one trigger can fire in each of the two scenarios -------------------------------------
@pytest.mark.parametrize("marker", ["c3 = Cluster(", "c4 = Cluster("])
def test_lab02_names_the_one_trigger_that_fired(marker):
    cell = code_cell(LAB02, marker)
    rows = [line for line in text_of(cell).splitlines() if re.match(r"\s+\d+\.\d+\s+\d+\s+broker-a", line)]
    fired = next(tok for tok in rows[-1].split() if tok in ("a.i", "a.ii", "b.i", "b.ii", "c"))
    # The explanation is the markdown after the scenario (after the TRIGGERS legend for section 5).
    cs = cells(LAB02)
    i = next(k for k, c in enumerate(cs) if c.get("id") == cell.get("id"))
    prose = next(c.source for c in cs[i + 1:] if c.cell_type == "markdown" and "(a.ii)" in c.source)
    assert "whichever" not in prose and "only one trigger" in flat(prose)
    other = {"a.ii": "b.i", "b.i": "a.ii"}[fired]
    # The trigger that fired is the one the text says fires; the other is the one it says cannot.
    said = re.search(r"only one trigger (?:could|can) (?:elect the next master|fire)[^.]*?\((a\.ii|b\.i)\)",
                     flat(prose))
    assert said and said.group(1) == fired, prose
    assert f"({other})" in prose


# --- 3. lab 04: the epoch said to be unknown to Y is absent from Y's file; the other one is in it -----------
def _epoch_files(out: str) -> dict[str, list[int]]:
    return {m.group(1): [int(e) for e in re.findall(r"\((\d+), \d+\)", m.group(2))]
            for m in re.finditer(r"^\s+(broker-n\d)\s+epochs \[(.*?)\]\s+log ends at \d+", out, re.M)}


def test_lab04_the_epoch_called_unknown_is_missing_from_the_new_masters_file():
    files = _epoch_files(text_of(code_cell(LAB04, "elected from outside the SyncStateSet")))
    verdicts = re.findall(r"(broker-n\d)'s newest epoch (\d+) is (in|not in) (broker-n\d)'s epoch file",
                          text_of(code_cell(LAB04, "newest epoch")))
    assert len(verdicts) == 2, verdicts
    for node, epoch, where, y in verdicts:
        assert files[node][-1] == int(epoch)
        assert (int(epoch) in files[y]) == (where == "in")
    # Story D's text: X's newest epoch is unknown to Y, the old master's is not.
    assert sorted(w for _n, _e, w, _y in verdicts) == ["in", "not in"]
    story_d = flat(next(s for s in markdown(LAB04) if "### D." in s))
    assert "their newest epochs are unknown" not in story_d
    assert "X's newest epoch" in story_d and "unknown to Y" in story_d
    assert "The old master's newest epoch is different: Y has it" in story_d


# --- 4. lab 04: one story labelling across the setup, the headings, the panel and the quiz ----------------
def test_lab04_labels_the_unclean_election_as_story_c_everywhere():
    cs = cells(LAB04)
    heading = {}
    story = None
    for c in cs:
        m = re.search(r"^### ([A-D])\. (.*)$", c.source, re.M) if c.cell_type == "markdown" else None
        if m:
            story = m.group(1)
            heading[story] = m.group(2)
        if c.cell_type == "code" and "elected from outside the SyncStateSet" in text_of(c):
            unclean_story = story
    assert unclean_story == "C" and "unclean" in heading["C"].lower()
    assert all("unclean" not in heading[s].lower() for s in "ABD")
    setup = flat(next(c.source for c in cs if c.cell_type == "markdown" and "enableElectUncleanMaster=true" in c.source
                      and "story" in c.source))
    assert "matters only in story C" in setup and "stories A and B are clean" in setup
    quiz = flat(next(c.source for c in cs if c.cell_type == "markdown" and c.source.startswith("### Quiz")))
    assert "Story C's election was unclean" in quiz and "In story D, which setting" not in quiz
    # The panel counts exactly one election from outside the SyncStateSet: story C's.
    panel = text_of(code_cell(LAB04, "evaluate(c.events()"))
    assert re.search(r"\d+ elections, 1 from outside the SyncStateSet", panel)


# --- 5. lab 01: the guide's claims, each with a criterion; glosses translate only --------------------------
def _claims() -> list[list[str]]:
    cell = code_cell(LAB01, "mc.claims_html(")
    table = next(o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {}))
    rows = re.findall(r"<tr>(.*?)</tr>", table)
    head = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", rows[0])]
    assert head[-1] == "criterion" and head[-2] == "holds?"
    return [[html.unescape(re.sub(r"<.*?>", "", td)) for td in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in rows[1:]]


def test_lab01_every_verdict_states_its_criterion_and_the_latency_claim_is_judged_on_the_ratio():
    claims = _claims()
    assert claims and all(row[-1].strip() for row in claims), [row[:2] for row in claims if not row[-1].strip()]
    no_delay = next(row for row in claims if "消息无延迟" in row[1])
    # 「消息无延迟」: no replication lag; failover time is reported, not judged.
    assert "replication lag" in no_delay[-1] and "name server" not in no_delay[-1]
    latency = next(row for row in claims if "大约低10%" in row[1])
    ratio = float(re.search(r"\((\d+(?:\.\d+)?)x", latency[3]).group(1))
    assert (latency[4] == "✔ yes") == (1.0 < ratio <= 1.25), (ratio, latency[4])


@pytest.mark.parametrize("mode, must_not_add", [("proxy-local", ["goes down", "continue"]),
                                                ("proxy-cluster", ["outlives", "hop"]),
                                                ("controller-standalone", ["failover"])])
def test_lab01_glosses_add_nothing_the_guide_does_not_say(mode, must_not_add):
    for row in _claims():
        if row[0] == mode and "allAckInSyncStateSet" not in row[1]:
            assert not any(word in row[2] for word in must_not_add), row[2]


# --- 6. lab 02: the rank of a candidate without live info is rmqlab's rule ---------------------------------
def test_lab02_labels_the_no_live_info_rank_as_rmqlabs():
    text = flat(next(s for s in markdown(LAB02) if "elect_master(candidates" in s))
    k = text.index("without live info ranks after all the others")
    assert "rmqlab's rule, not RocketMQ's" in text[k - 80:k]


# --- 7. labs 03 and 04 agree on the epoch label of a batch cut at an epoch boundary -----------------------
def test_labs_03_and_04_agree_that_the_cut_batch_carries_the_next_epoch():
    lab03, lab04 = flat("\n".join(markdown(LAB03))), flat("\n".join(markdown(LAB04)))
    assert "its header names the epoch its bytes belong to" not in lab03
    assert "labelled with the **next** epoch" in lab03 and "AutoSwitchHAConnection" in lab03
    assert "labelled with the next epoch" in lab04
    assert "wrong epoch" not in lab04


# --- 8. / 9. lab 02: who applies when; electMaster's flags --------------------------------------------------
def test_lab02_the_leader_answers_after_the_commit_and_the_empty_entry_is_the_controllers():
    text = flat(next(s for s in markdown(LAB02) if "## 2. The replicated event log" in s))
    assert "only then does it answer" not in text and "DLedger appends an empty entry" not in text
    assert "answers the broker once the entry is **committed**" in text and "asynchronous" in text
    assert "`DLedgerController` does the same with an empty entry" in text


def test_every_electmaster_command_uses_mqadmins_flags():
    # ReElectMasterSubCommand: -a controller address, -c cluster, -bn broker name, -b broker id.
    for path in (LAB01, LAB02, LAB03, LAB04):
        for c in cells(path):
            for cmd in re.findall(r"electMaster((?: -[a-z]+ \S+)+)", c.source):
                flags = re.findall(r" (-[a-z]+) ", cmd + " ")
                assert set(flags) <= {"-a", "-c", "-bn", "-b"} and "-b" in flags and "-bn" in flags, (path.name, cmd)


# --- 10. lab 02: 「副本数大于等于 2 即可」 is a recommendation -------------------------------------------------
def test_lab02_quotes_the_replica_count_as_a_recommendation():
    cell = flat(next(s for s in markdown(LAB02) if "副本数大于等于 2" in s))
    assert "recommendation" in cell and "does not say that one member is enough" in cell
    assert '2n** failures as long as one SyncStateSet member is left ("副本数大于等于 2 即可")' not in cell


# --- 12. lab 04: the commit log's loss, not every store file's ----------------------------------------------
def test_lab04_counts_the_commit_logs_lost_bytes():
    out = text_of(code_cell(LAB04, "torn_bytes="))
    m = re.search(r"(broker-n\d)'s machine crashed: its commit log ended at (\d+), now at (\d+): (\d+) commit-log "
                  r"bytes lost", out)
    assert m, out
    node, before, after, lost = m.group(1), *map(int, m.groups()[1:])
    assert before - after == lost > 0
    files = {mm.group(1): (mm.group(2), int(mm.group(3))) for mm in
             re.finditer(r"^\s+(broker-n\d)\s+epochs \[(.*?)\]\s+log ends at (\d+)", out, re.M)}
    assert files[node][1] == after                      # what its files hold now
    # allAckInSyncStateSet: everything it had acknowledged was on the new master, whose epoch 2 starts there.
    assert any(f"(2, {before})" in entries for entries, _end in files.values())
    total = int(re.search(r"counts (\d+) unflushed bytes", out).group(1))
    assert total >= lost


# --- 13. lab 01: the number of client settings it says differ is the number it lists ----------------------
def test_lab01_counts_the_client_settings_it_lists():
    text = flat(next(s for s in markdown(LAB01) if "client settings differ" in s))
    word = re.search(r"(\w+) client settings differ", text).group(1).lower()
    listed = re.findall(r"\((\d)\) ", text[text.index("client settings differ"):])
    assert {"two": 2, "three": 3, "four": 4}[word] == len(listed) == int(listed[-1])


# --- teaching: glossary first, a note after every figure, answers not given away -------------------------
GLOSSARY = {LAB01: ["SyncStateSet", "allAckInSyncStateSet", "RIP-44", "nemesis", "unknown"],
            LAB02: ["SyncStateSet", "RIP-44", "active controller", "3S"],
            LAB03: ["SyncStateSet", "confirm offset", "epoch file", "HAConnectionState"],
            LAB04: ["SyncStateSet", "allAckInSyncStateSet", "clean / unclean election", "confirm offset"]}


@pytest.mark.parametrize("path", GLOSSARY, ids=lambda p: p.name)
def test_each_lab_defines_its_terms_before_its_first_section(path):
    cs = cells(path)
    first_section = next(i for i, c in enumerate(cs) if c.cell_type == "markdown" and c.source.startswith("## "))
    glossary = next((c.source for c in cs[:first_section] if c.cell_type == "markdown"
                     and c.source.startswith("**Words this lab uses")), "")
    for term in GLOSSARY[path]:
        assert re.search(rf"\*\*`?{re.escape(term)}`?\*\*|\*\*{re.escape(term)}\*\* \(", glossary), (path.name, term)


@pytest.mark.parametrize("path", [LAB01, LAB02, LAB03, LAB04], ids=lambda p: p.name)
def test_every_figure_is_followed_by_what_to_notice(path):
    for c in cells(path):
        if c.cell_type == "code" and any(PLOTLY in o.get("data", {}) for o in c.outputs):
            assert "**What to notice" in next_markdown(path, c), (path.name, c.source[:80])


def test_lab01_time_is_realistic():
    minutes = int(re.search(r"\*\*Time:\*\* about (\d+) minutes", cells(LAB01)[0].source).group(1))
    assert minutes >= 60   # nine modes to read, a live cluster, real processes and two exercises


def test_lab03_exercise_2_answers_are_not_given_before_it():
    cs = cells(LAB03)
    ex2 = next(i for i, c in enumerate(cs) if c.cell_type == "markdown" and "### Exercise 2" in c.source)
    before = flat("\n".join(c.source for c in cs[:ex2] if c.cell_type == "markdown"))
    for answer in ("haHousekeepingInterval", "haSendHeartbeatInterval", "Five virtual seconds"):
        assert answer not in before, answer


def test_lab01_defines_push2slave_max_offset_as_the_examples_use_it():
    from rmqlab.lab.exercises import EXERCISES

    definition = flat(next(s for s in markdown(LAB01) if "push2slave_max_offset` —" in s))
    for ex in EXERCISES["transfer_ok"].public_examples:
        _next, _ack_nums, acks, push2 = ex.args
        if acks and push2 > max(acks):
            assert "stays when a connection closes" in definition, ex.name
        if acks and push2 < max(acks):
            assert "behind one" in definition, ex.name
    assert "the largest offset any slave acknowledged (`push2SlaveMaxOffset`)" not in definition


@pytest.mark.parametrize("path", [LAB01, LAB02, LAB03, LAB04], ids=lambda p: p.name)
def test_no_long_helper_cells_are_shown_to_students(path):
    # Machinery belongs in rmqlab (lab 04's story helpers are rmqlab/lab/truncation_stories.py).
    for c in cells(path):
        if c.cell_type == "code":
            assert len(c.source.splitlines()) <= 60, (path.name, c.source[:80])


def test_lab01_schedule_in_prose_is_the_one_it_prints():
    printed = text_of(code_cell(LAB01, "print(f\"modes:"))
    every, crash, down, reader = re.search(r"one send every (\d+) ms, \d+ sends; crash (\d+) s into the workload; "
                                           r"down (\d+) s; new reader (\d+) s after the crash", printed).groups()
    schedule = flat(next(s for s in markdown(LAB01) if "## 1. The experiment" in s))
    assert f"one message every {every} ms" in schedule and f"*i* × {every} ms" in schedule
    assert f"**crash**: {crash} s in" in schedule and f"stays down {down} s" in schedule
    assert f"**reader**: {reader} s after the crash" in schedule

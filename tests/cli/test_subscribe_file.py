"""`paperbell subscribe --from-file`: everyone a CSV file lists, on a real database (SQLite,
or PostgreSQL with PAPERBELL_TEST_DATABASE_URL), as a user runs it: every row checked first,
every bad row named by its line, nothing added twice."""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from support.cli import PAPERBELL, clean_env, outcome
from support.paths import DOCS, manual_text

from bot.core.models import Subscriber
from bot.store import Store

pytestmark = pytest.mark.database

CONFIG = """version = 1
[database]
url = "{url}"
[digest]
max_rules = 3
[email]
from = "papers@example.org"
[[subscribers]]
name = "ada"
email = "ada@example.org"
rules = ["robot"]
"""

COLUMNS = (
    "name,email,rules,labels,categories,include,max_papers,schedule,day,time,timezone,"
    "notify_empty,summaries,language,similar_max,similar_min\n"
)


def write_config(tmp_path: Path, database_url: str) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG.format(url=database_url))
    return config


def stored(database_url: str) -> dict[str, Subscriber]:
    with Store.open(database_url) as store:
        return {s.name: s for s in store.subscribers.all(include_inactive=True)}


def test_a_file_subscribes_as_subscribe_does_and_again_adds_nothing(
    tmp_path: Path, database_url: str
) -> None:
    config = write_config(tmp_path, database_url)
    cli = functools.partial(outcome, config=config)
    people = tmp_path / "people.csv"
    people.write_text(
        COLUMNS + 'bob,bob@lab.example,"""diffusion policy""; marl OR ""multi-agent; RL""",'
        "Diffusion;MARL,cs.RO;cs.lg,new;replace,20,weekly,fri,7:30,Asia/Tokyo,yes,true,zh,3,0.4\n"
        ",carl.x+papers@lab.example,drone\n"
        "\n"  # an empty line is no row
        "dee,dee@lab.example,grasping,,,,,,,,,,,none,,\n",
        encoding="utf-8",
    )
    code, out = cli("subscribe", "--from-file", str(people))
    assert code == 0, out
    assert "added 3 subscribers from " in out and "(4 rules), their addresses confirmed" in out
    assert "named after their address: 1 row without a name" in out

    # The same person given to `subscribe` with the same settings is stored the same.
    code, out = cli(
        "subscribe",
        "twin",
        "--email",
        "bob@lab.example",
        '"diffusion policy"',
        'marl OR "multi-agent; RL"',
        "--label",
        "Diffusion",
        "--label",
        "MARL",
        *("--category", "cs.RO", "--category", "cs.LG", "--include", "new", "--include"),
        *("replace", "--max-papers", "20", "--schedule", "weekly", "--day", "fri"),
        *("--time", "7:30", "--timezone", "Asia/Tokyo", "--notify-empty", "--summaries"),
        *("--language", "zh", "--similar-max", "3", "--similar-min", "0.4"),
    )
    assert code == 0, out
    found = stored(database_url)
    bob, twin = found["bob"], found["twin"]
    assert replace(twin, id=bob.id, name="bob", created=bob.created) == bob
    assert bob.labels == {'"diffusion policy"': "Diffusion", 'marl OR "multi-agent; RL"': "MARL"}
    assert bob.categories == ("cs.RO", "cs.LG") and bob.include == {"new", "replace"}
    carl = found["carl.x-papers"]
    assert carl.email == "carl.x+papers@lab.example" and carl.email_confirmed
    assert carl.rules == ("drone",) and carl.schedule.describe() == "daily at 08:00 (UTC)"
    assert found["dee"].language is None
    code, out = cli("list")
    assert "bob <bob@lab.example> [database, active]" in out
    assert '1. Diffusion: "diffusion policy"' in out

    # Again: everyone is stored already (carl found by his address); nothing changes.
    code, out = cli("subscribe", "--from-file", str(people))
    assert code == 0, out
    assert "added no one from" in out
    assert "left as they are: 3 subscribers stored already (bob, carl.x-papers, dee)" in out
    assert stored(database_url) == found


def test_every_bad_row_is_named_and_nothing_is_added(tmp_path: Path, database_url: str) -> None:
    config = write_config(tmp_path, database_url)
    cli = functools.partial(outcome, config=config)
    people = tmp_path / "people.csv"
    people.write_text(
        "email,rules,name\n"
        "bob@lab.example,robot,bob\n"  # 2: good
        "eve@lab,robot,eve\n"  # 3: a bad address
        'fay@lab.example,"robot; ""open",fay\n'  # 4: a rule that does not parse
        "bob2@lab.example,drone,bob\n"  # 5: a name twice
        "BOB@lab.example,drone,bobby\n"  # 6: an address twice
        "ada@lab.example,robot,ada\n"  # 7: the config file's
        "gus@lab.example,a;b;c;d,gus\n"  # 8: over [digest] max_rules
        "hal@lab.example,robot,hal,extra\n"  # 9: a cell past the header's
        "ivy@lab.example,,ivy\n"  # 10: no rule
        "jo@lab.example,robot,jo\n",  # 11: good
        encoding="utf-8",
    )
    code, out = cli("subscribe", "--from-file", str(people))
    assert code == 2, out
    for expected in (
        "line 3: email: not a plausible email address: 'eve@lab'",
        'line 4: rule 2: missing closing " for the phrase that starts at column 1',
        "line 5: name: the name 'bob' is on line 2 already",
        "line 6: email: the address 'bob@lab.example' is on line 2 already",
        "line 7: name: 'ada' is declared in the config file: change it there",
        "line 8: rules: 4 rules, more than the 3 a subscriber may have",
        "line 9: 4 cells, but the header names 3 columns",
        "line 10: rules: no rule",
        "hint: nothing was added: fix them and run it again",
    ):
        assert expected in out, expected
    assert "line 2:" not in out and "line 11:" not in out
    assert set(stored(database_url)) == set()  # not even the good rows

    code, out = cli("subscribe", "--from-file", str(people), "--dry-run", "--skip-bad")
    assert code == 1 and "would add 2 subscribers from" in out and "added nothing" in out
    assert set(stored(database_url)) == set()
    code, out = cli("subscribe", "--from-file", str(people), "--skip-bad")
    assert code == 1, out
    assert "skipped line 3: email: not a plausible email address" in out
    assert "added 2 subscribers from" in out and "left out: 8 bad rows" in out
    assert set(stored(database_url)) == {"bob", "jo"}


def test_a_dry_run_makes_no_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    config = write_config(tmp_path, url)
    people = tmp_path / "people.csv"
    people.write_text("email,rules\nbob@lab.example,robot\n")
    code, out = outcome("subscribe", "--from-file", str(people), "--dry-run", config=config)
    assert code == 0 and "would add 1 subscriber from" in out
    assert not (tmp_path / "db.sqlite").exists()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "no header: the first line names the columns"),
        (b"\n\n", "no header"),
        (b"email,rulez\n", "unknown column 'rulez' (did you mean 'rules'?)"),
        (b"name,email\n", "line 1: the header lacks 'rules'"),
        (b"email,rules,email\n", "the column 'email' is given twice"),
        (b"email,rules\nbob@lab.example,caf\xe9\n", "line 2: not UTF-8 (byte 32 is 0xe9)"),
        (b'"email,rules\n', "line 1: the header is no CSV"),
    ],
)
def test_a_file_that_is_no_list_of_people_is_refused(
    tmp_path: Path, database_url: str, content: bytes, said: str
) -> None:
    config = write_config(tmp_path, database_url)
    people = tmp_path / "people.csv"
    people.write_bytes(content)
    code, out = outcome("subscribe", "--from-file", str(people), config=config)
    assert code == 2 and said in out, out


def test_standard_input_semicolons_a_bom_and_crlf(tmp_path: Path, database_url: str) -> None:
    """A spreadsheet's export in many locales: `;` between cells, a BOM, CRLF line ends."""
    config = write_config(tmp_path, database_url)
    text = (
        "\ufeffName;E-mail;Rules\r\n"
        'bob;bob@lab.example;"robot;""a;b"""\r\n'
        "cy;cy@lab.example;drone\r\n"
    )
    done = subprocess.run(
        [*PAPERBELL, "subscribe", "-c", str(config), "--from-file", "-"],
        input=text.encode("utf-8"),
        capture_output=True,
        timeout=120,
        env=clean_env(),
        cwd=tmp_path,
    )
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, out
    assert "added 2 subscribers from standard input (3 rules)" in out
    assert stored(database_url)["bob"].rules == ("robot", '"a;b"')


def test_name_rules_and_options_do_not_go_with_a_file(tmp_path: Path, database_url: str) -> None:
    config = write_config(tmp_path, database_url)
    people = tmp_path / "people.csv"
    people.write_text("email,rules\nbob@lab.example,robot\n")
    cli = functools.partial(outcome, config=config)
    code, out = cli("subscribe", "bob", "--from-file", str(people))
    assert code == 2 and "give no NAME with it" in out
    code, out = cli("subscribe", "--from-file", str(people), "--email", "x@y.org", "--time", "9:00")
    assert code == 2 and "give no --email, --time with it" in out
    code, out = cli("subscribe", "--skip-bad")
    assert code == 2 and "--skip-bad and --dry-run go with --from-file" in out
    code, out = cli("subscribe")
    assert code == 2 and "Missing argument 'NAME'" in out
    code, out = cli("subscribe", "--from-file", str(tmp_path / "nope.csv"))
    assert code == 2 and "No such file" in out


def test_the_manual_s_example_file_subscribes_as_it_says(tmp_path: Path, database_url: str) -> None:
    if not DOCS.exists():
        pytest.skip("run from a source checkout")
    (example,) = re.findall(r"```csv\n(.*?)```", manual_text(), re.S)
    people = tmp_path / "people.csv"
    people.write_text(example)
    config = tmp_path / "config.toml"
    config.write_text(CONFIG.format(url=database_url).split("[[subscribers]]")[0])
    code, out = outcome("subscribe", "--from-file", str(people), config=config)
    assert code == 0 and "added 2 subscribers" in out, out
    found = stored(database_url)
    assert found["ada"].labels == {
        '"diffusion policy"': "Diffusion",
        'marl OR "multi-agent RL"': "MARL",
    }
    assert found["ada"].schedule.describe() == "weekly on Friday at 16:00 (Europe/Paris)"
    assert found["lin"].rules == ("robot cat:cs.RO",)

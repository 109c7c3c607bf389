#!/usr/bin/python3
"""Writes the man page of one of our command-line tools with help2man.

usage: gen-manpage.py --program PATH --include TOOL.h2m --output TOOL.1
                      [--version-string VERSION] [--help2man help2man]

help2man renders the tool's own --help and --version, so options never drift
from the code; TOOL.h2m adds what --help cannot say (NAME, exit status,
examples, files, ...). Two placeholders in TOOL.h2m are filled in here:

  @COMMANDS@  one subsection per subcommand (CLI11 "Subcommands:" list), each
              rendered from `TOOL SUBCOMMAND --help`
  @FOOTER@    the text CLI11 prints after the option lists (the footer);
              without the placeholder the footer is left out

The tool runs with a fixed environment (C locale, PACSET_STORE unset, COLUMNS
80) so that the page does not depend on the machine that builds it.
Exit status: 0 success, 1 failure (the message names the step), 2 usage error.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

LIST_HEADS = ("Options:", "Positionals:", "Arguments:", "Subcommands:")


def fail(message):
    print(f"gen-manpage: error: {message}", file=sys.stderr)
    sys.exit(1)


def tool_env(bindir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PACSET")}
    env.update(LC_ALL="C.UTF-8", COLUMNS="80", PATH=bindir + os.pathsep + env.get("PATH", ""))
    if os.geteuid() != 0:
        # Non-root defaults live under $HOME; show "~" rather than the builder's home.
        env["HOME"] = "~"
    return env


def run(argv, env):
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"`{shlex.join(argv)}` exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def normalise_argparse(text):
    """argparse help ("usage:", "options:") in the headings help2man knows, the
    positional arguments after the options so that both land in OPTIONS."""
    text = re.sub(r"^usage: ", "Usage: ", text, flags=re.M)
    text = re.sub(r"^options:$", "Options:", text, flags=re.M)
    paragraphs = text.rstrip("\n").split("\n\n")
    positional = [p for p in paragraphs if p.startswith("positional arguments:\n")]
    rest = [p for p in paragraphs if not p.startswith("positional arguments:\n")]
    moved = [p.replace("positional arguments:", "Arguments:", 1) for p in positional]
    return "\n\n".join(rest + moved) + "\n"


def split_footer(text):
    """CLI11 help -> (body, footer). The footer is the text after the blank
    line that ends the last option, argument or subcommand list."""
    lines = text.rstrip("\n").split("\n")
    heads = [i for i, line in enumerate(lines) if line in LIST_HEADS]
    if not heads:
        return text, ""
    for i in range(heads[-1] + 1, len(lines)):
        if lines[i] == "":
            rest = "\n".join(lines[i + 1:]).strip("\n")
            if rest:
                return "\n".join(lines[:i]) + "\n", rest + "\n"
            break
    return text, ""


def subcommands(help_text):
    """Names in the "Subcommands:" section; "unmount, umount" yields "unmount"."""
    names, inside = [], False
    for line in help_text.split("\n"):
        if line == "Subcommands:":
            inside = True
        elif inside and line.startswith("  ") and line.strip():
            names.append(re.split(r"\s{2,}", line.strip())[0].split(",")[0].strip())
        elif inside:
            inside = False
    return names


def roff(text):
    """Escapes plain text for roff."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + l if l.startswith((".", "'")) else l for l in text.split("\n"))


def render_subcommand(prog, name, help_text, footer):
    """One `prog name --help` as a .SS subsection with .TP entries."""
    lines = help_text.rstrip("\n").split("\n")
    summary = lines[0] if lines and not lines[0].startswith("Usage:") else ""
    usage = next((l[len("Usage:"):].strip() for l in lines if l.startswith("Usage:")), f"{prog} {name}")
    out = [f'.SS "{roff(usage)}"']
    if summary:
        out.append(roff(summary))
    body, sub_footer = split_footer(help_text)
    entries = []  # (heading, [(left, description)])
    current = None
    for line in body.split("\n"):
        if line in ("Options:", "Positionals:"):
            current = (line[:-1], [])
            entries.append(current)
        elif current is not None and line.startswith("  ") and line.strip():
            if line.startswith("   ") and current[1]:
                # description of an entry whose name filled the first column
                left, desc = current[1][-1]
                current[1][-1] = (left, (desc + " " + line.strip()).strip())
                continue
            parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            left = parts[0]
            if left in ("-h,--help",):
                continue  # every subcommand has it; said once in OPTIONS
            current[1].append((left, parts[1] if len(parts) > 1 else ""))
        elif not line.strip():
            current = None
    labelled = sum(1 for _, items in entries if items) > 1
    for heading, items in entries:
        if not items:
            continue
        if labelled:
            out.append(".PP\n" + ("Arguments:" if heading == "Positionals" else "Options:"))
        for left, desc in items:
            name_part, _, type_part = left.partition(" ")
            name_r = "\\fB" + roff(name_part).replace(",", "\\fR, \\fB") + "\\fR"
            if type_part:
                name_r += " \\fI" + roff(type_part) + "\\fR"
            out.append(".TP\n" + name_r + "\n" + roff(desc))
    if sub_footer and sub_footer.strip() != footer.strip():
        out.append(".PP\n.nf\n" + roff(sub_footer.rstrip("\n")) + "\n.fi")
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(prog="gen-manpage.py", description="Man page with help2man.")
    ap.add_argument("--program", required=True, help="the built tool")
    ap.add_argument("--include", required=True, help="TOOL.h2m with the hand-written sections")
    ap.add_argument("--output", required=True)
    ap.add_argument("--version-string", help="for tools without --version")
    ap.add_argument("--help2man", default="help2man")
    args = ap.parse_args(argv)

    prog_path = os.path.abspath(args.program)
    prog = os.path.basename(prog_path)
    if not os.access(prog_path, os.X_OK):
        fail(f"{prog_path} is not an executable")
    env = tool_env(os.path.dirname(prog_path))
    help_text = normalise_argparse(run([prog, "--help"], env))
    version = args.version_string or run([prog, "--version"], env).strip()
    body, footer = split_footer(help_text)

    try:
        with open(args.include) as f:
            include = f.read()
    except OSError as e:
        fail(f"cannot read {args.include}: {e.strerror}")
    subs = subcommands(body)
    if "@COMMANDS@" in include:
        if not subs:
            fail(f"{args.include} has @COMMANDS@ but `{prog} --help` lists no subcommands")
        rendered = [render_subcommand(prog, s, run([prog, s, "--help"], env), footer) for s in subs]
        include = include.replace("@COMMANDS@", ".SH COMMANDS\n" + "\n".join(rendered))
    elif subs:
        fail(f"{args.include} needs an @COMMANDS@ placeholder: `{prog} --help` lists subcommands")
    include = include.replace("@FOOTER@", ".PP\n.nf\n" + roff(footer.rstrip("\n")) + "\n.fi" if footer else "")
    for section in ("EXIT STATUS", "EXAMPLES"):
        if section not in include:
            fail(f"{args.include} has no {section} section")

    with tempfile.TemporaryDirectory(prefix="gen-manpage.") as tmp:
        # help2man runs a stand-in that prints the prepared texts, so the page
        # shows "prog", not the build path, and the footer goes where the
        # include file puts it.
        with open(os.path.join(tmp, "help"), "w") as f:
            f.write(body)
        with open(os.path.join(tmp, "version"), "w") as f:
            f.write(version + "\n")
        with open(os.path.join(tmp, "include.h2m"), "w") as f:
            f.write(include)
        stand_in = os.path.join(tmp, prog)
        with open(stand_in, "w") as f:
            f.write("#!/bin/sh\n"
                    f'case "$1" in --help) exec cat {shlex.quote(tmp)}/help;; '
                    f"--version) exec cat {shlex.quote(tmp)}/version;; esac\nexit 2\n")
        os.chmod(stand_in, 0o755)
        h2m_env = dict(env, PATH=tmp + os.pathsep + os.environ.get("PATH", ""))
        page = run([args.help2man, "--no-info", "--section=1", "--no-discard-stderr",
                    f"--include={os.path.join(tmp, 'include.h2m')}", prog], h2m_env)
    # help2man names the stand-in's path nowhere, but keep the page honest.
    if tmp in page:
        fail("the generated page mentions a temporary path")
    tmp_out = args.output + ".tmp"
    with open(tmp_out, "w") as f:
        f.write(page)
    os.replace(tmp_out, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

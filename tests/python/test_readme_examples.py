"""The README's Python and Dask examples run as a user would paste them."""
import os
import re
import subprocess
import sys

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def examples():
    with open(README) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_the_readme_has_a_python_and_a_dask_example():
    blocks = examples()
    assert len(blocks) >= 2
    assert any("pacset.dask.predict" in b for b in blocks)


@pytest.mark.parametrize("index", range(len(examples())))
def test_readme_example_runs(index, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(examples()[index].replace("/tmp/forest.pac", str(tmp_path / "f.pac")))
    import pacset

    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(pacset.__file__)))
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]

"""What grove's plotting scripts share: matplotlib without a display, and PNG files written
atomically, only over regular files.

A PNG is drawn into a temporary file in the target's own directory and renamed over the target,
so that a reader never sees half an image and a failure leaves the old file as it was. The target
must be a regular file or not exist yet, in an existing directory: a directory, a device
(/dev/null), a FIFO, a socket or a link to one of those (or to nothing) is refused before anything
is drawn, as grove::io's atomic writes refuse them.

Exit statuses of the scripts: 2 for a usage error (bad arguments, an output path that cannot be
written), 1 when the work itself fails (matplotlib missing, unreadable input).
"""
import os
import stat
import sys
import tempfile


class UsageError(Exception):
    """An argument the script cannot work with (exit status 2)."""


class Failure(Exception):
    """The work failed (exit status 1)."""


def pyplot(program):
    """matplotlib.pyplot on the Agg backend (no display needed), or Failure naming the package."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise Failure(f"{program}: matplotlib is missing ({e}); install Debian's python3-matplotlib "
                      f"(sudo apt-get install python3-matplotlib) and run with /usr/bin/python3") from e
    return plt


def output_problem(path):
    """Why `path` cannot be (re)written as a PNG, or None when it can."""
    if not path:
        return "the output path is empty"
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        link = None
    except OSError as e:
        return f"{path}: {e.strerror}"
    if link is not None:
        try:
            st = os.stat(path)
        except OSError:
            return f"{path}: a symbolic link to nothing; only regular files are replaced"
        if stat.S_ISDIR(st.st_mode):
            return f"{path}: it is a directory"
        if not stat.S_ISREG(st.st_mode):
            return (f"{path}: it is a special file (a device, a FIFO or a socket); only regular "
                    f"files are replaced")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"{path}: the directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{path}: cannot write in the directory {parent}"
    return None


def save_png(fig, path, program):
    """Writes the figure to `path` atomically: a temporary file in the same directory, flushed to
    disk, then renamed over `path` (the file a link points to, when `path` is a link to one)."""
    problem = output_problem(path)
    if problem:
        raise UsageError(f"{program}: {problem}")
    target = os.path.realpath(path)
    directory = os.path.dirname(target)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".tmp",
                               dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # what a plain open() would give, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def run(program, main):
    """Runs main() and turns grove's errors into a message on stderr and the exit status."""
    try:
        main()
    except UsageError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    except Failure as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        print(f"{program}: {e}", file=sys.stderr)
        sys.exit(1)

"""runjob's stat-loop watcher (when inotify cannot see the job's writes). Stdlib only.

stdin: "+PATH" follows a log file or a marker folder, "-PATH" drops it; EOF stops the loop.
stdout: "ready" once, then each followed path that changed (size or mtime), and for a
marker folder each new or replaced entry as "FOLDER/NAME" (the folder itself when it
appears). A sweep is one scandir() or stat() per followed path: a missing folder (a job
still queued) costs one failed lookup.
"""
import os
import select
import sys

INTERVAL = float(os.environ.get("RUNJOB_WATCH_INTERVAL", "0.25"))


def look(path):
    """What can change: a log's size and mtime; a marker folder's entries, each by inode and
    mtime (a marker is replaced by a rename, and a folder's own mtime can stay the same when
    an entry is added within the same clock tick)."""
    try:
        with os.scandir(path) as folder:
            return {e.name: (e.inode(), e.stat().st_mtime_ns) for e in folder if not e.name.startswith(".")}
    except NotADirectoryError:
        pass
    except OSError:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def main():
    followed = {}  # path -> last look(): (size, mtime_ns) of a log, {entry: (inode, mtime_ns)} of a folder, or None
    pending = b""
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    while True:
        readable, _, _ = select.select([0], [], [], INTERVAL)
        if readable:
            chunk = os.read(0, 65536)
            if not chunk:
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "surrogateescape")
                if line.startswith("+"):
                    followed[line[1:]] = look(line[1:])
                elif line.startswith("-"):
                    followed.pop(line[1:], None)
        changed = []
        for path, old in followed.items():
            new = look(path)
            if new == old:
                continue
            followed[path] = new
            if isinstance(new, dict):
                before = old if isinstance(old, dict) else {}
                fresh = [name for name, mark in sorted(new.items()) if before.get(name) != mark]
                if old is None:
                    changed.append(path)  # the marker folder appeared
                changed.extend(path + "/" + name for name in fresh)
            else:
                changed.append(path)  # a log that appeared or grew
        if changed:
            out.write("\n".join(changed) + "\n")
            out.flush()


main()

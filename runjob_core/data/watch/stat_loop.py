"""runjob's stat-loop watcher (when inotify cannot see the job's writes). Stdlib only.

stdin: "+PATH" follows a log file or a marker folder, "-PATH" drops it; EOF stops the loop.
stdout: "ready" once, then each followed path that changed (size or mtime), and for a
marker folder each new or replaced entry as "FOLDER/NAME" (the folder itself when it
appears). A sweep is one stat() per followed path.
"""
import os
import select
import sys

INTERVAL = float(os.environ.get("RUNJOB_WATCH_INTERVAL", "0.25"))


def look(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def entries(path):
    """A marker folder's entries and their mtimes (a replaced marker counts as new)."""
    try:
        return {e.name: e.stat().st_mtime_ns for e in os.scandir(path) if not e.name.startswith(".")}
    except OSError:
        return {}


def main():
    followed = {}  # path -> last (size, mtime_ns) or None
    names = {}  # marker folder -> {entry: mtime_ns} seen
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
                    path = line[1:]
                    followed[path] = look(path)
                    names[path] = entries(path) if followed[path] else {}
                elif line.startswith("-"):
                    followed.pop(line[1:], None)
                    names.pop(line[1:], None)
        changed = []
        for path, old in followed.items():
            new = look(path)
            if new == old:
                continue
            followed[path] = new
            now = entries(path)
            fresh = [name for name, mtime in sorted(now.items()) if names[path].get(name) != mtime]
            if old is None or not fresh:
                changed.append(path)  # a log that grew, or a marker folder that appeared
            changed.extend(path + "/" + name for name in fresh)
            names[path] = now
        if changed:
            out.write("\n".join(changed) + "\n")
            out.flush()


main()

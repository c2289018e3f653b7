"""Read NetworkManager keyfiles with libnm's own parser and verify() each connection.
Run with Debian's /usr/bin/python3 (python3-gi, gir1.2-nm-1.0); exit 1 if any is rejected."""

import sys

import gi

gi.require_version("NM", "1.0")
from gi.repository import NM, GLib  # noqa: E402

rejected = 0
for path in sys.argv[1:]:
    keyfile = GLib.KeyFile()
    try:
        keyfile.load_from_file(path, GLib.KeyFileFlags.NONE)
        connection = NM.keyfile_read(keyfile, "/etc/NetworkManager/system-connections",
                                     NM.KeyfileHandlerFlags.NONE, None, None)
        connection.verify()
    except GLib.Error as exc:
        print(f"{path}: {exc.message}")
        rejected += 1
sys.exit(1 if rejected else 0)

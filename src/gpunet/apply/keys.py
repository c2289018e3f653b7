"""Keys before passwords: the admin's public key put on nodes that still take a password, as
ssh-copy-id does, so applying the keys-only sshd afterwards cannot lock the admin out."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from gpunet.errors import UsageError
from gpunet.files.inputs import read_text

# One public key line: type, base64 blob, optional comment; nothing a shell or sshd would read more in.
KEY_LINE = re.compile(r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|"
                      r"sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [ -~]{0,200})?$")
# Runs on the node with the key on stdin: never a shell word. Appends only a key not there yet.
INSTALL_SCRIPT = (
    'umask 077; k=$(cat) && mkdir -p "$HOME/.ssh" && touch "$HOME/.ssh/authorized_keys" && '
    '{ grep -qxF -- "$k" "$HOME/.ssh/authorized_keys" || printf "%s\\n" "$k" >> "$HOME/.ssh/authorized_keys"; }'
)
PASSWORD_ONLY = ("-o", "PubkeyAuthentication=no", "-o", "PreferredAuthentications=keyboard-interactive,password")


def read_public_key(path: Path) -> str:
    """The one key line of a .pub file, checked; UsageError otherwise (a private key included)."""
    try:
        lines = [line.strip() for line in read_text(path, 64 * 1024, "public key").splitlines() if line.strip()]
    except UsageError as exc:
        raise UsageError(f"--pubkey {exc}") from None
    if len(lines) != 1 or not KEY_LINE.match(lines[0]):
        raise UsageError(f"--pubkey {path}: not one OpenSSH public key line (give the .pub file)")
    return lines[0]


def install_key_on(target: str, key_line: str, user: str | None, ssh: str = "ssh") -> bool:
    """ssh to TARGET with a password (this terminal answers the prompt) and append the key."""
    if not KEY_LINE.match(key_line):
        raise UsageError("not an OpenSSH public key line")
    destination = ["-l", user] if user else []
    done = subprocess.run([ssh, *PASSWORD_ONLY, *destination, "--", target, INSTALL_SCRIPT], input=key_line + "\n",
                          text=True, check=False)
    return done.returncode == 0

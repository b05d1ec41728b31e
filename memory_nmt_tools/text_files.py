"""Reading users' text files strictly, for the commands and the analyses.

Files are UTF-8, split on LF only (``str.splitlines`` would also split on characters such as
U+0085, which occur inside real WMT segments), with the CR of CRLF ends removed. Problems
raise ``TextFileError`` naming the file and line and what to do.
"""
from pathlib import Path


class TextFileError(ValueError):
    """Bad input: the message names the file and line (or document) and what to do."""


def numbered_lines(path):
    """Yield (line number, text) for each line of a UTF-8 file, without line ends."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise TextFileError(f"cannot read {path}: {error.strerror}") from None
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    for number, raw in enumerate(raw_lines, 1):
        try:
            text = raw.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError as error:
            raise TextFileError(
                f"{path}:{number}: not valid UTF-8 (byte {error.start + 1} of the line); "
                "convert the file to UTF-8, e.g. with iconv"
            ) from None
        if "\r" in text:
            raise TextFileError(
                f"{path}:{number}: carriage return inside the line (old Mac line ends?); "
                "convert the line ends to LF or CRLF"
            )
        yield number, text.removeprefix("\ufeff") if number == 1 else text


def read_lines(path):
    """The lines of a UTF-8 file, without line ends."""
    return [text for _, text in numbered_lines(path)]

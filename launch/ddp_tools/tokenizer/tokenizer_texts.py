"""tokenizer_texts.py: texts generated from a seed, to compare tokenizers on: ASCII prose
(words, contractions, digits, punctuation, whitespace runs, CRLF), Unicode from every
script's letters with combining marks, other scripts' digits, symbols, emoji sequences and
every kind of whitespace, edge cases, and ill-formed UTF-8. Characters are drawn from what
this Python's unicodedata assigns (its Unicode version printed by unicode_version()),
excluding surrogates and unassigned code points. Standard library only."""
import random
import unicodedata

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D", "'x", "'"]
# Unicode's White_Space, U+180E (a former space, now a format character) and U+200B/FEFF
# (zero-width, not White_Space): where regex engines are known to differ.
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000",
          "\u2003", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u180e", "\u200b", "\ufeff",
          " \n ", "\n   ", "    \n"]
ASCII_WORDS = ("the of and to in is it you that he was for on are with as I his they be at one have this from or "
               "had by word but what some we can out other were all there when up use your how said an each she "
               "which do their time if will way about many then them write would like so these her long make thing "
               "see him two has look more day could go come did number sound no most people my over know water "
               "than call first who may down side been now find Romeo Juliet THOU thee KING Exeunt").split()


def unicode_version():
    return unicodedata.unidata_version


def ascii_text(rng, n_bytes):
    """ASCII prose of about n_bytes: words, contractions, numbers, punctuation, spacing."""
    out, size = [], 0
    while size < n_bytes:
        r = rng.random()
        if r < 0.70:
            w = rng.choice(ASCII_WORDS)
            if rng.random() < 0.1:
                w = w.upper()
            if rng.random() < 0.08:
                w += rng.choice(CONTRACTIONS)
            piece = w
        elif r < 0.78:
            piece = str(rng.randrange(10 ** rng.randint(1, 12)))
        elif r < 0.90:
            piece = rng.choice([".", ",", ";", ":", "!", "?", "--", "...", "(", ")", "[", "]", "\"", "'", "&c.",
                                "<|endoftext|>", "#", "$%^", "_"])
        else:
            piece = rng.choice([" ", "  ", "\n", "\n\n", "\r\n", "\t", "   \n", " \n\n  "])
        sep = " " if rng.random() < 0.85 else ""
        out.append(piece + sep)
        size += len(piece) + len(sep)
    return "".join(out)


def _pools():
    letters_by_script, marks, digits, symbols, others = {}, [], [], [], []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat == "Cn":
            continue
        if cat[0] == "L":
            script = unicodedata.name(ch, "UNNAMED").split()[0]
            letters_by_script.setdefault(script, []).append(ch)
        elif cat[0] == "M":
            marks.append(ch)
        elif cat[0] == "N":
            digits.append(ch)
        elif cat[0] in "PS":
            symbols.append(ch)
        elif cat in ("Cf", "Co", "Cc", "Zs", "Zl", "Zp"):
            others.append(ch)
    return letters_by_script, marks, digits, symbols, others


_POOLS = None


def unicode_text(rng, n_chars):
    """About n_chars characters: words of one script each (every script's letters, sometimes
    with combining marks and contractions), digits of every kind, symbols, emoji sequences
    (ZWJ, skin tones, flags, variation selectors), control and format characters, spacing."""
    global _POOLS
    if _POOLS is None:
        _POOLS = _pools()
    letters_by_script, marks, digits, symbols, others = _POOLS
    scripts = sorted(letters_by_script)
    emoji = [chr(c) for c in range(0x1F300, 0x1FAFF) if unicodedata.category(chr(c)) != "Cn"]
    out, size = [], 0
    while size < n_chars:
        r = rng.random()
        if r < 0.45:
            pool = letters_by_script[rng.choice(scripts)]
            w = "".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
            if rng.random() < 0.2:
                w += "".join(rng.choice(marks) for _ in range(rng.randint(1, 3)))
            if rng.random() < 0.1:
                w += rng.choice(CONTRACTIONS)
            piece = w
        elif r < 0.55:
            piece = "".join(rng.choice(digits) for _ in range(rng.randint(1, 6)))
        elif r < 0.65:
            piece = "".join(rng.choice(symbols) for _ in range(rng.randint(1, 4)))
        elif r < 0.72:
            e = rng.choice(emoji)
            k = rng.random()
            if k < 0.25:
                e += "\u200d" + rng.choice(emoji)
            elif k < 0.4:
                e += chr(rng.randint(0x1F3FB, 0x1F3FF))
            elif k < 0.5:
                e = chr(rng.randint(0x1F1E6, 0x1F1FF)) + chr(rng.randint(0x1F1E6, 0x1F1FF))
            elif k < 0.6:
                e += "\ufe0f"
            piece = e
        elif r < 0.76:
            piece = rng.choice(others)
        elif r < 0.80:
            piece = rng.choice(marks)  # a mark with nothing to combine with
        elif r < 0.85:
            piece = rng.choice(ASCII_WORDS) + rng.choice(CONTRACTIONS + [""])
        else:
            piece = rng.choice(SPACES)
        sep = " " if rng.random() < 0.6 else ""
        out.append(piece + sep)
        size += len(piece) + len(sep)
    return "".join(out)


def edge_cases():
    """Short texts where a tokenizer most often goes wrong (each non-empty: one document)."""
    return [" ", "  ", "         ", "\n", "\r\n", "\r\n\r\n", "a\r\nb", "trailing  ", "trailing \n", "x \n ",
            "'s", "'S", "it's", "IT'S", "it'S", "we'll've", "'ll'll", "don't", "''s", "' s", "a's b'd c'm d're",
            "12345678901234567890", "3.14159", "1,000,000", " 42", "x  y", "x   y", "\t\tx", " \t x",
            "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "\u00a0x", "x\u00a0", "\u3000x",
            "\u180e", "a\u180eb", " \u180ex", "x \u180e\u180e y", "\u200b", "\ufeff", "\x85", "e\u0301", "\u0301", "Ωmega", "日本語テキスト",
            "한국어", "العربية ١٢٣", "हिन्दी", "👩‍👩‍👧‍👦", "🇫🇷", "✊🏽", "\x00", "\x00\x01\x7f", "ß", "ǅ",
            "Ⅻ", "½", "𝟘𝟙", "a" * 5000, " " * 3000, "\n" * 100 + "x", "!" * 1000]


def invalid_utf8(rng, n_bytes):
    """Bytes of about n_bytes mixing valid UTF-8 with every kind of ill-formed sequence:
    stray continuation bytes, C0/C1/F5-FF, sequences cut short (also at the end), overlongs,
    surrogates, code points above U+10FFFF."""
    bad = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xc2", b"\xe0\x80\xaf", b"\xe0\xa0", b"\xed\xa0\x80",
           b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x9f", b"\xf0\x9f\x98", b"\xf4\x90\x80\x80", b"\xf5\x80",
           b"\xfe", b"\xff", b"\xe2\x82", b"\xe2\x28\xa1", b"\xf1\x80\x80", b"\xc3\x28"]
    out, size = [], 0
    while size < n_bytes:
        if rng.random() < 0.3:
            piece = rng.choice(bad)
        elif rng.random() < 0.2:
            piece = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        else:
            piece = rng.choice(["word ", "día ", "日本 ", "😀", " ", "\n", "x"]).encode("utf-8")
        out.append(piece)
        size += len(piece)
    if rng.random() < 0.5:
        out.append(rng.choice([b"\xe2\x82", b"\xf0\x9f\x98", b"\xc2"]))  # cut short at the very end
    return b"".join(out)


def new_rng(seed):
    return random.Random(seed)

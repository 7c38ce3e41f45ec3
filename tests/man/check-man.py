#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the built man pages (man/): each renders without a warning of man(1), and the
configuration pages name every key and slotd(8) every name of the D-Bus API, so that they
cannot drift from the contract:
slotd.ini(5) every key of SPEC.md §2's two tables, slotd-allocator.ini(5) every key of
config/allocator.ini (the example that lists each with its default).

Usage: check-man.py SOURCE_ROOT PAGE...   (exit 77 = skipped: man(1) is missing)"""
import os
import re
import shutil
import subprocess
import sys

failures = []
assertions = 0


def check(ok, what):
    global assertions
    assertions += 1
    if not ok:
        failures.append(what)


def roff_text(path):
    """The page's roff with font changes and escapes of '-' and '.' undone, so that a key
    reads as written (rendered text would hyphenate it at a line's end)."""
    text = open(path, encoding='utf-8').read()
    text = re.sub(r'\\f[BIRP]', '', text)
    return text.replace('\\-', '-').replace('\\&', '').replace('\\(rs', '\\')


def entry_keys(text):
    """The keys an entry of the page is about: the line above each indented paragraph
    ('.RS'), 'a.b' or 'a.b, a.c'. A key only named in another key's prose does not count."""
    lines = text.splitlines()
    keys = set()
    for line, after in zip(lines, lines[1:]):
        if after.startswith('.RS') and not line.startswith('.'):
            keys.update(k.strip() for k in line.split(', '))
    return keys


def spec_keys(spec):
    """Every INI key of SPEC §2's tables (slotd.ini's and the fleet files'): a row 'a.b / a.c'
    or 'a.b / .c' names each. The other tables of §2 (launch parameters, the .gsh mapping)
    are spec_names()'."""
    text = open(spec, encoding='utf-8').read()
    sec = text[text.index('## 2. Configuration'):text.index('## 3. ')]
    keys = []
    for line in sec.splitlines():
        if not line.startswith('| ') or line.startswith('| section.key') or line.startswith('|---'):
            continue
        row = line.split(' | ')[0][2:].strip()
        if not re.match(r'^[a-z_]+\.[a-z_]+( / |$)', row):
            continue
        parts = [p.strip() for p in row.split(' / ')]
        base = parts[0].rsplit('.', 1)[0]
        keys.append(parts[0])
        keys += [base + p if p.startswith('.') else p for p in parts[1:]]
    return keys


def spec_names(spec):
    """The names of SPEC §2's other tables: each launch parameter ($$port$$...) and each
    field of a .gsh file (the last part of `builds.NAME.buildPath`, `….speed`...)."""
    text = open(spec, encoding='utf-8').read()
    sec = text[text.index('## 2. Configuration'):text.index('## 3. ')]
    names = set()
    for line in sec.splitlines():
        if not line.startswith('| `'):
            continue
        for cell in re.findall(r'`([^`]+)`', line.split(' | ')[0]):
            last = re.split(r'[.…]', cell.replace('[I]', ''))[-1]
            if last and last not in ('NAME', 'REGION'):
                names.add(last)
    return sorted(names)


def spec_dbus_names(spec):
    """The D-Bus API of SPEC §8: every method and signal (`Name(`) and every property
    (`Name t`, `Name a(su)`...) named there."""
    text = open(spec, encoding='utf-8').read()
    sec = text[text.index('\n## 8. '):text.index('\n## 9. ')]
    names = set(re.findall(r'`([A-Z][A-Za-z0-9]+)\(', sec))
    names |= set(re.findall(r'`([A-Z][A-Za-z0-9]+) [a-z(){}]+`', sec))
    return sorted(names)


def ini_keys(path):
    """section.key of every key of an example INI file, commented ones included."""
    keys, section = [], None
    for line in open(path, encoding='utf-8'):
        m = re.match(r'^\[(\w+)\]', line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r'^#?(\w+) = ', line)
        if m and section:
            keys.append(section + '.' + m.group(1))
    return keys


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    if not shutil.which('man'):
        print('skipped: man(1) is not installed (Debian package man-db)')
        return 77
    root, pages = sys.argv[1], sys.argv[2:]
    by_name = {os.path.basename(p): p for p in pages}
    for page in pages:
        r = subprocess.run(['man', '--warnings', '-l', '-Tutf8', page],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, MANWIDTH='80'))
        check(r.returncode == 0, f'{page}: man exits {r.returncode}')
        check(r.stderr.strip() == '', f'{page}: man warns:\n{r.stderr}')
        name = os.path.basename(page)
        shown = re.sub(r'\x1b\[[0-9;]*m', '', re.sub(r'.\x08', '', r.stdout))
        check('NAME' in shown and name.rsplit('.', 1)[0] + ' - ' in shown,
              f'{page}: no NAME section naming {name}')
    for page, keys in (('slotd.ini.5', spec_keys(os.path.join(root, 'SPEC.md'))),
                       ('slotd-allocator.ini.5',
                        ini_keys(os.path.join(root, 'config', 'allocator.ini')))):
        check(page in by_name, f'{page} was not built')
        if page not in by_name:
            continue
        check(len(keys) >= 10, f'{page}: only {len(keys)} keys found to check: {keys}')
        entries = entry_keys(roff_text(by_name[page]))
        for key in keys:
            check(key in entries, f'{page} has no entry for the key {key}')
    if 'slotd.ini.5' in by_name:
        text = roff_text(by_name['slotd.ini.5'])
        names = spec_names(os.path.join(root, 'SPEC.md'))
        check(len(names) >= 20, f'slotd.ini.5: only {len(names)} names found to check: {names}')
        for name in names:
            check(name in text, f'slotd.ini.5 does not name {name} (SPEC §2)')
    if 'slotd.8' in by_name:
        # slotd(8) carries the D-Bus API (issue 27.2): every name of SPEC §8.
        text = roff_text(by_name['slotd.8'])
        names = spec_dbus_names(os.path.join(root, 'SPEC.md'))
        check(len(names) >= 50, f'slotd.8: only {len(names)} D-Bus names found to check: {names}')
        for name in names:
            check(re.search(r'\b' + name + r'\b', text) is not None,
                  f'slotd.8 does not name {name} (SPEC §8, the D-Bus API)')
    for f in failures:
        print('FAIL: ' + f, file=sys.stderr)
    print(f'{assertions - len(failures)} passed, {len(failures)} failed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())

//! The benchmark command's first simple command as `sh -c` would see it (leading assignments, the
//! program, its arguments; quotes removed, `$VAR`, `${VAR}`, `${VAR:-word}` and `~/` expanded,
//! unquoted expansions split into fields), so the preflight can check the program without running
//! the shell. What only the shell can tell (a command substitution, a special parameter in the
//! program's word) gives `None` rather than a guess.

/// A variable's value as the benchmark will see it: `Some(Some(v))` set, `Some(None)` unset
/// (the shell expands it to nothing), `None` not knowable before the run (e.g. `RATCHET_OUT`).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<Option<String>>;

/// The first simple command of a shell command line.
#[derive(Debug, Clone, PartialEq)]
pub struct Simple {
    /// `NAME=value` words before the program, expanded (`None`: not knowable).
    pub assignments: Vec<(String, Option<String>)>,
    /// The program, expanded.
    pub program: String,
    /// The program's word as written in the command (to rewrite it in a hint).
    pub program_raw: String,
    /// Variables the program's word names that are unset (expanded to nothing).
    pub unset: Vec<String>,
    /// The arguments, expanded (`None`: not knowable).
    pub args: Vec<Option<String>>,
}

/// One lexed word: its characters, each marked when it came from an unquoted expansion (and so
/// is subject to field splitting).
#[derive(Default)]
struct Word {
    raw: String,
    chars: Vec<(char, bool)>,
    quoted: bool,
    unknown: bool,
    unset: Vec<String>,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name(s: &str) -> bool {
    s.chars().next().is_some_and(is_name_start) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Characters that end a simple command (operators, redirections, a subshell).
fn is_operator(c: char) -> bool {
    matches!(c, ';' | '&' | '|' | '<' | '>' | '(' | ')' | '\n')
}

struct Lexer<'a> {
    s: Vec<char>,
    i: usize,
    var: Lookup<'a>,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    /// A `$` expansion (the `$` consumed) into `w`; `Err` where the shell alone can tell.
    fn expand(&mut self, w: &mut Word, split: bool) -> Result<(), ()> {
        let value = match self.peek() {
            Some('{') => {
                let close = self.s[self.i..].iter().position(|&c| c == '}').ok_or(())? + self.i;
                let inner: String = self.s[self.i + 1..close].iter().collect();
                w.raw.push_str(&format!("${{{inner}}}"));
                self.i = close + 1;
                let (name, default, colon) = match inner.find([':', '-']) {
                    Some(k) if inner[k..].starts_with(":-") => (&inner[..k], Some(&inner[k + 2..]), true),
                    Some(k) if inner[k..].starts_with('-') => (&inner[..k], Some(&inner[k + 1..]), false),
                    Some(_) => return Err(()),
                    None => (inner.as_str(), None, false),
                };
                if !is_name(name) || default.is_some_and(|d| d.contains(['$', '`', '\\', '\'', '"'])) {
                    return Err(());
                }
                match ((self.var)(name), default) {
                    (None, _) => None,
                    (Some(Some(v)), Some(d)) if colon && v.is_empty() => Some(d.to_string()),
                    (Some(Some(v)), _) => Some(v),
                    (Some(None), Some(d)) => Some(d.to_string()),
                    (Some(None), None) => {
                        w.unset.push(name.to_string());
                        Some(String::new())
                    }
                }
            }
            Some(c) if is_name_start(c) => {
                let start = self.i;
                while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                    self.i += 1;
                }
                let name: String = self.s[start..self.i].iter().collect();
                w.raw.push('$');
                w.raw.push_str(&name);
                match (self.var)(&name) {
                    None => None,
                    Some(Some(v)) => Some(v),
                    Some(None) => {
                        w.unset.push(name);
                        Some(String::new())
                    }
                }
            }
            // A command or arithmetic substitution: its extent is the shell's business.
            Some('(') => return Err(()),
            // $1, $@, $$, $?, ...: known only inside the running shell.
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                w.raw.push('$');
                w.raw.push(c);
                self.i += 1;
                None
            }
            _ => {
                w.raw.push('$');
                Some("$".to_string())
            }
        };
        match value {
            Some(v) => w.chars.extend(v.chars().map(|c| (c, split))),
            None => w.unknown = true,
        }
        Ok(())
    }

    /// The next word, or `Ok(None)` at the end of the simple command.
    fn word(&mut self) -> Result<Option<Word>, ()> {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.i += 1;
        }
        match self.peek() {
            None => return Ok(None),
            Some(c) if is_operator(c) || c == '#' => return Ok(None),
            _ => {}
        }
        let mut w = Word::default();
        while let Some(c) = self.peek() {
            if c == ' ' || c == '\t' || is_operator(c) {
                break;
            }
            self.i += 1;
            match c {
                '\'' => {
                    let close = self.s[self.i..].iter().position(|&c| c == '\'').ok_or(())? + self.i;
                    let text: String = self.s[self.i..close].iter().collect();
                    w.raw.push_str(&format!("'{text}'"));
                    w.chars.extend(text.chars().map(|c| (c, false)));
                    w.quoted = true;
                    self.i = close + 1;
                }
                '"' => {
                    w.raw.push('"');
                    w.quoted = true;
                    loop {
                        let c = self.peek().ok_or(())?;
                        self.i += 1;
                        match c {
                            '"' => break,
                            '`' => return Err(()),
                            '$' => self.expand(&mut w, false)?,
                            '\\' => {
                                let n = self.peek().ok_or(())?;
                                self.i += 1;
                                w.raw.push('\\');
                                w.raw.push(n);
                                if !matches!(n, '$' | '`' | '"' | '\\' | '\n') {
                                    w.chars.push(('\\', false));
                                }
                                if n != '\n' {
                                    w.chars.push((n, false));
                                }
                            }
                            c => {
                                w.raw.push(c);
                                w.chars.push((c, false));
                            }
                        }
                    }
                    w.raw.push('"');
                }
                '\\' => {
                    let n = self.peek().ok_or(())?;
                    self.i += 1;
                    w.raw.push('\\');
                    w.raw.push(n);
                    if n != '\n' {
                        w.chars.push((n, false));
                        w.quoted = true;
                    }
                }
                '`' => return Err(()),
                '$' => self.expand(&mut w, true)?,
                '~' if w.raw.is_empty() && matches!(self.peek(), None | Some('/' | ' ' | '\t')) => {
                    w.raw.push('~');
                    match (self.var)("HOME") {
                        Some(Some(h)) => w.chars.extend(h.chars().map(|c| (c, false))),
                        _ => w.unknown = true,
                    }
                }
                c => {
                    w.raw.push(c);
                    w.chars.push((c, false));
                }
            }
        }
        Ok(Some(w))
    }
}

/// The fields a word expands to: split at whitespace that came from an unquoted expansion; an
/// unquoted word that expands to nothing is no word at all.
fn fields(w: &Word) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut any = false;
    for &(c, split) in &w.chars {
        if split && c.is_whitespace() {
            if any {
                out.push(std::mem::take(&mut cur));
                any = false;
            }
        } else {
            cur.push(c);
            any = true;
        }
    }
    if any || (w.quoted && out.is_empty()) {
        out.push(cur);
    }
    out
}

/// The command's first simple command, or `None` when its program cannot be told without
/// running the shell (a command substitution, an unterminated quote, a glob, a special
/// parameter or a variable not knowable before the run in the program's word).
pub fn first_simple(command: &str, var: Lookup) -> Option<Simple> {
    let mut lx = Lexer { s: command.chars().collect(), i: 0, var };
    let mut assignments = vec![];
    let mut program: Option<(String, String, Vec<String>)> = None;
    let mut args = vec![];
    loop {
        let w = match lx.word() {
            Ok(Some(w)) => w,
            Ok(None) => break,
            // Past the program, an argument only the shell can expand ends what is known.
            Err(()) if program.is_some() => {
                args.push(None);
                break;
            }
            Err(()) => return None,
        };
        if program.is_none() {
            if let Some((name, _)) = w.raw.split_once('=').filter(|(n, _)| is_name(n)) {
                let eq = w.chars.iter().position(|&(c, _)| c == '=')?;
                let value: String = w.chars[eq + 1..].iter().map(|&(c, _)| c).collect();
                assignments.push((name.to_string(), (!w.unknown).then_some(value)));
                continue;
            }
            if w.unknown {
                return None;
            }
            let mut f = fields(&w).into_iter();
            if let Some(first) = f.next() {
                if !w.quoted && first.contains(['*', '?', '[']) {
                    return None;
                }
                program = Some((first, w.raw.clone(), w.unset.clone()));
                args.extend(f.map(Some));
            }
        } else if w.unknown {
            args.push(None);
        } else {
            args.extend(fields(&w).into_iter().map(Some));
        }
    }
    let (program, program_raw, unset) = program?;
    Some(Simple { assignments, program, program_raw, unset, args })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<Option<String>> {
        match name {
            "RATCHET_REPO" => Some(Some("/home/u/my repo".into())),
            "PY" => Some(Some("python3 -u".into())),
            "HOME" => Some(Some("/home/u".into())),
            "EMPTY" => Some(Some(String::new())),
            "RATCHET_OUT" => None,
            _ => Some(None),
        }
    }

    fn prog(cmd: &str) -> Option<String> {
        first_simple(cmd, &env).map(|s| s.program)
    }

    #[test]
    fn plain_words_and_assignments() {
        let s = first_simple("XLA_FLAGS=\"--a --b\" CUDA=1 python3 prepare.py --x 'y z'", &env).unwrap();
        assert_eq!(s.assignments, vec![("XLA_FLAGS".into(), Some("--a --b".into())), ("CUDA".into(), Some("1".into()))]);
        assert_eq!(s.program, "python3");
        assert_eq!(s.args, vec![Some("prepare.py".into()), Some("--x".into()), Some("y z".into())]);
        assert_eq!(prog("./run.sh && echo done").as_deref(), Some("./run.sh"));
        assert_eq!(prog("cd bench; python3 x.py").as_deref(), Some("cd"));
        assert_eq!(prog(""), None);
        assert_eq!(prog("# a comment"), None);
    }

    #[test]
    fn variables_are_expanded_as_sh_would() {
        let s = first_simple("$RATCHET_REPO/.venv/bin/python prepare.py", &env).unwrap();
        // Unquoted, a value with a space splits into two words, as it would in sh.
        assert_eq!(s.program, "/home/u/my");
        assert_eq!(s.program_raw, "$RATCHET_REPO/.venv/bin/python");
        assert_eq!(prog("\"$RATCHET_REPO/.venv/bin/python\" prepare.py").as_deref(), Some("/home/u/my repo/.venv/bin/python"));
        assert_eq!(prog("\"${RATCHET_REPO}/bin/py\"").as_deref(), Some("/home/u/my repo/bin/py"));
        let s = first_simple("$PY prepare.py", &env).unwrap();
        assert_eq!((s.program.as_str(), s.args.len()), ("python3", 2));
        assert_eq!(prog("${NOPE:-/usr/bin/python3} x.py").as_deref(), Some("/usr/bin/python3"));
        assert_eq!(prog("${EMPTY:-a} x").as_deref(), Some("a"));
        assert_eq!(prog("${EMPTY-a} x").as_deref(), Some("x"), "an empty unquoted expansion is no word");
        assert_eq!(prog("~/venv/bin/python x.py").as_deref(), Some("/home/u/venv/bin/python"));
        assert_eq!(prog("'$RATCHET_REPO/x'").as_deref(), Some("$RATCHET_REPO/x"));
        assert_eq!(prog("\\$HOME/x").as_deref(), Some("$HOME/x"));
        let s = first_simple("${NOPE}/python x.py", &env).unwrap();
        assert_eq!((s.program.as_str(), s.unset.clone()), ("/python", vec!["NOPE".to_string()]));
    }

    #[test]
    fn what_only_the_shell_knows_is_not_guessed() {
        assert_eq!(prog("$(which python3) x.py"), None);
        assert_eq!(prog("`which python3` x.py"), None);
        assert_eq!(prog("$RATCHET_OUT/tool"), None);
        assert_eq!(prog("$1 x"), None);
        assert_eq!(prog("${X#y} x"), None);
        assert_eq!(prog("'unterminated x"), None);
        assert_eq!(prog("py* x"), None);
        // An argument that cannot be known does not hide the program.
        let s = first_simple("python3 x.py $(date) y", &env).unwrap();
        assert_eq!((s.program.as_str(), s.args.clone()), ("python3", vec![Some("x.py".into()), None]));
        let s = first_simple("python3 x.py $RATCHET_OUT", &env).unwrap();
        assert_eq!(s.args, vec![Some("x.py".into()), None]);
    }
}

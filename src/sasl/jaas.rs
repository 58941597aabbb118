//! JAAS login configuration files, as Java's `sun.security.provider.ConfigFile` reads them:
//!
//! ```text
//! QuorumServer {
//!     org.apache.zookeeper.server.auth.DigestLoginModule required
//!     user_zk1="secret";               // comments: // and /* */
//! };
//! ```
//!
//! Sections (application names) of login-module entries, each a class name, a control flag
//! and `key=value` options (a value quoted or a bare word). Two sections of one name are an
//! error, as in Java. `${property}` expansion is not done: such a value is taken literally.

use std::collections::BTreeMap;
use std::path::Path;

/// A file larger than this is refused (a JAAS file is a few hundred bytes).
pub const MAX_FILE: u64 = 1024 * 1024;

/// One login-module entry of a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginModule {
    pub class: String,
    /// `required`, `requisite`, `sufficient` or `optional`.
    pub flag: String,
    /// Later keys win, as in Java's option map.
    pub options: BTreeMap<String, String>,
}

/// A whole file: section name to its entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JaasConfig {
    pub sections: BTreeMap<String, Vec<LoginModule>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Punct(char),
}

impl JaasConfig {
    pub fn read(path: &Path) -> Result<JaasConfig, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.len() > MAX_FILE {
            return Err(format!(
                "{}: {} bytes, more than a JAAS file's limit of {MAX_FILE}",
                path.display(),
                meta.len()
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        JaasConfig::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<JaasConfig, String> {
        let tokens = tokenize(text)?;
        let mut config = JaasConfig::default();
        let mut i = 0;
        let word = |i: usize, what: &str| -> Result<String, String> {
            match tokens.get(i) {
                Some((Token::Word(w), _)) | Some((Token::Quoted(w), _)) => Ok(w.clone()),
                Some((t, line)) => Err(format!("line {line}: expected {what}, found {t:?}")),
                None => Err(format!("expected {what}, found the end of the file")),
            }
        };
        let punct = |i: usize, c: char| -> Result<(), String> {
            match tokens.get(i) {
                Some((Token::Punct(p), _)) if *p == c => Ok(()),
                Some((t, line)) => Err(format!("line {line}: expected '{c}', found {t:?}")),
                None => Err(format!("expected '{c}', found the end of the file")),
            }
        };
        while i < tokens.len() {
            let name = word(i, "a section name")?;
            let line = tokens[i].1;
            punct(i + 1, '{')?;
            i += 2;
            let mut modules = Vec::new();
            while !matches!(tokens.get(i), Some((Token::Punct('}'), _))) {
                let class = word(i, "a login module class or '}'")?;
                let flag = word(
                    i + 1,
                    "a control flag (required, requisite, sufficient, optional)",
                )?;
                if !["required", "requisite", "sufficient", "optional"]
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(&flag))
                {
                    return Err(format!(
                        "line {}: control flag {flag:?} is not required, requisite, sufficient or optional",
                        tokens[i + 1].1
                    ));
                }
                i += 2;
                let mut options = BTreeMap::new();
                while !matches!(tokens.get(i), Some((Token::Punct(';'), _))) {
                    let key = word(i, "an option or ';'")?;
                    punct(i + 1, '=')?;
                    let value = word(i + 2, "an option's value")?;
                    options.insert(key, value);
                    i += 3;
                }
                i += 1;
                modules.push(LoginModule {
                    class,
                    flag: flag.to_ascii_lowercase(),
                    options,
                });
            }
            punct(i + 1, ';')?;
            i += 2;
            if config.sections.insert(name.clone(), modules).is_some() {
                return Err(format!(
                    "line {line}: a second section named {name:?} (Java: \"Can not specify multiple entries for {name}\")"
                ));
            }
        }
        Ok(config)
    }

    pub fn section(&self, name: &str) -> Option<&[LoginModule]> {
        self.sections.get(name).map(Vec::as_slice)
    }
}

fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, String> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let start = line;
                let mut prev = ' ';
                loop {
                    match chars.next() {
                        Some('/') if prev == '*' => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            prev = c;
                        }
                        None => return Err(format!("line {start}: unterminated /* comment")),
                    }
                }
            }
            '{' | '}' | ';' | '=' => out.push((Token::Punct(c), line)),
            '"' => {
                let start = line;
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => s.push(c),
                            None => return Err(format!("line {start}: unterminated string")),
                        },
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            s.push(c)
                        }
                        None => return Err(format!("line {start}: unterminated string")),
                    }
                }
                out.push((Token::Quoted(s), start));
            }
            c => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || "{};=\"".contains(n) {
                        break;
                    }
                    w.push(n);
                    chars.next();
                }
                out.push((Token::Word(w), line));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zookeepers_documented_quorum_sections() {
        let text = r#"
            // From ZooKeeper's admin guide.
            QuorumServer {
                   org.apache.zookeeper.server.auth.DigestLoginModule required
                   user_test="test"  user_zk2 = "a \"quoted\" one";
            };
            /* the learner
               side */
            QuorumLearner {
                   org.apache.zookeeper.server.auth.DigestLoginModule Required
                   username="test"
                   password=test;
            };
        "#;
        let c = JaasConfig::parse(text).unwrap();
        let server = c.section("QuorumServer").unwrap();
        assert_eq!(server[0].options["user_zk2"], "a \"quoted\" one");
        let learner = &c.section("QuorumLearner").unwrap()[0];
        assert_eq!(learner.flag, "required");
        assert_eq!(learner.options["password"], "test");
    }

    #[test]
    fn errors_name_the_line() {
        let e = JaasConfig::parse("A {\n m maybe;\n};").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = JaasConfig::parse("A { m required; };\nA { m required; };").unwrap_err();
        assert!(e.contains("second section"), "{e}");
        for bad in [
            "A {",
            "A { m required k= ; };",
            "A { m required \"x",
            "/*",
            "A { m required; }",
        ] {
            assert!(JaasConfig::parse(bad).is_err(), "{bad}");
        }
    }
}

//! The config file: defaults, overrides, and that no command touches it.

use crate::util::*;

sandbox_test!(
    fn the_config_file_sets_defaults_that_options_override() {
        let env = Env::new("config");
        let cfg = env.root.join("config.toml");
        std::fs::write(
            &cfg,
            "policy = \"strict\"\nshell = \"/bin/bash\"\n[retention]\nkeep_versions = 3\nartifacts_max_age = \"7d\"\n",
        )
        .expect("config");
        let gw = |args: &[&str]| -> Output {
            env.cmd()
                .env("GATEWAY_CONFIG", &cfg)
                .args(args)
                .output()
                .expect("run")
        };
        let o = gw(&["--json", "config", "show"]);
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["found"], true);
        assert_eq!(v["policy"]["value"], "strict");
        assert_eq!(v["policy"]["from"], "config file");
        assert_eq!(v["effective_retention"]["keep_versions"], 3);
        assert_eq!(v["effective_retention"]["artifacts_max_age"], 7 * 86_400);
        assert_eq!(v["shell"], "/bin/bash");
        // The config's policy is used: strict denies fs rm --permanent (standard would ask).
        std::fs::write(env.ws.join("f"), "x").expect("w");
        let o = gw(&["fs", "rm", "--permanent", "f"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        // ... unless an option says otherwise.
        let o = gw(&["--policy", "standard", "fs", "rm", "--permanent", "f"]);
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        // gateway sh runs the config's shell: bash syntax works.
        let o = gw(&[
            "--policy",
            "standard",
            "sh",
            "-c",
            "echo ${BASH_VERSION:+bash}",
        ]);
        assert_eq!(stdout(&o), "bash\n", "{}", text(&o));
        // A bad config is a policy-class error with its position.
        std::fs::write(
            &cfg,
            "policy = \"strict\"\n[retention]\nkeep_versions = 0\n",
        )
        .expect("w");
        let o = gw(&["config", "show"]);
        assert_eq!(o.status.code(), Some(123), "{}", text(&o));
        assert!(stderr(&o).contains("config.toml:3:"), "{}", text(&o));
        let o = gw(&["fs", "ls"]);
        assert_eq!(o.status.code(), Some(123), "{}", text(&o));
    }
);

sandbox_test!(
    fn no_command_reads_changes_or_creates_gateways_config() {
        // The config names the state directory and the default policy: a run that could
        // write it could point later runs elsewhere. Even permissive cannot reach it.
        let env = Env::new("config-guard");
        let cfg = env.root.join("gw-config.toml");
        std::fs::write(&cfg, "policy = \"strict\"\n").expect("config");
        let c = cfg.display().to_string();
        let run = |explicit: bool, script: &str| -> Output {
            let mut cmd = env.cmd();
            if explicit {
                cmd.env("GATEWAY_CONFIG", &cfg);
            } else {
                cmd.env_remove("GATEWAY_CONFIG")
                    .env_remove("XDG_CONFIG_HOME");
            }
            cmd.args(["--policy", "permissive", "exec", "--", "sh", "-c", script])
                .output()
                .expect("run")
        };
        let o = run(true, &format!("cat '{c}'"));
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!stdout(&o).contains("strict"), "{}", text(&o));
        let o = run(true, &format!("echo 'policy = \"permissive\"' > '{c}'"));
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(&cfg).expect("r"),
            "policy = \"strict\"\n"
        );
        // The default location: its directory exists (gateway made it) and is out of reach.
        let o = run(
            false,
            "mkdir -p \"$HOME/.config/gateway\"; echo 'state_dir = \"/tmp/x\"' > \"$HOME/.config/gateway/config.toml\"",
        );
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(env.home.join(".config/gateway").is_dir());
        assert!(!env.home.join(".config/gateway/config.toml").exists());
        // An existing sibling under ~/.config stays writable for permissive (new entries
        // directly in ~/.config are not: landlock leaves a denied path's ancestors list-only,
        // as ~/.ssh already does for $HOME).
        std::fs::create_dir_all(env.home.join(".config/other")).expect("mkdir");
        let o = run(false, "echo ok > \"$HOME/.config/other/f\"");
        assert!(o.status.success(), "{}", text(&o));
    }
);

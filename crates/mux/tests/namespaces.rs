//! Each attach's own name space and its control file `#ns`.

mod support;

use ninep_wire::Dialect;
use support::*;

#[tokio::test]
async fn each_attach_changes_only_its_own_name_space() {
    let a = ramfs_with(&["bin/", "bin/ls"]).await;
    let b = ramfs_with(&["bin/", "bin/rc", "lib/"]).await;
    let base = format!("mount {} /n/a\nbind /n/a/bin /bin\n", a.addr);
    let served = serve_mux(&base).await;
    for dialect in Dialect::ALL {
        let one = attach(&served.addr, dialect).await;
        let two = attach(&served.addr, dialect).await;
        // The control file reads back the base name space.
        assert_eq!(one.read_to_string("#ns").await.unwrap(), base);
        one.write(
            "#ns",
            format!("mount {} /n/b\nbind -a /n/b/bin /bin\n", b.addr),
        )
        .await
        .unwrap();
        assert_eq!(names(&one, "bin").await, ["ls", "rc"], "{dialect}");
        assert_eq!(names(&one, "n").await, ["a", "b"], "{dialect}");
        assert_eq!(
            one.read_to_string("#ns").await.unwrap(),
            format!("{base}mount {} /n/b\nbind -a /n/b/bin /bin\n", b.addr)
        );
        // The other attach, and any made later, see the base name space.
        assert_eq!(names(&two, "bin").await, ["ls"], "{dialect}");
        assert!(two.stat("n/b/lib").await.is_err());
        let three = attach(&served.addr, dialect).await;
        assert_eq!(names(&three, "bin").await, ["ls"], "{dialect}");
        // Unmount undoes one bind; a replacing bind undoes all before it.
        one.write("#ns", "unmount /n/b/bin /bin\n").await.unwrap();
        assert_eq!(names(&one, "bin").await, ["ls"], "{dialect}");
        one.write("#ns", "bind /n/b/lib /bin\n").await.unwrap();
        assert!(names(&one, "bin").await.is_empty(), "{dialect}");
        assert_eq!(
            one.read_to_string("#ns").await.unwrap(),
            format!(
                "mount {} /n/a\nmount {} /n/b\nbind /n/b/lib /bin\n",
                a.addr, b.addr
            )
        );
        one.write("#ns", "unmount /bin\n").await.unwrap();
        assert!(one.stat("bin").await.unwrap().is_dir());
        // Bad lines are refused, with the reason.
        for bad in ["bind /nothing /bin\n", "frob /x\n", "unmount /n\n"] {
            let err = one.write("#ns", bad).await.unwrap_err();
            assert!(err.is_remote(), "{bad}: {err}");
        }
        let err = one
            .write("#ns", "mount tcp!127.0.0.1!1 /n/c\n")
            .await
            .unwrap_err();
        if dialect == Dialect::L {
            assert_eq!(err.errno(), ninep_wire::Errno::ECONNREFUSED, "{err}");
        } else {
            assert!(err.to_string().contains("tcp!127.0.0.1!1"), "{err}");
        }
        // #ns is found only at the root; a union on the root leaves it there.
        assert!(one.stat("n/#ns").await.is_err());
        one.write("#ns", format!("mount -b {} /\n", b.addr))
            .await
            .unwrap();
        assert_eq!(names(&one, "").await, ["bin", "lib", "n"], "{dialect}");
        assert!(
            one.read_to_string("#ns")
                .await
                .unwrap()
                .ends_with(&format!("mount -b {} /\n", b.addr))
        );
    }
    served.stop().await;
}

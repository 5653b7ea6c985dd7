//! The modify-QP state table (IBA 11.2.5, C.11; the kernel's `qp_state_table` and
//! `ib_modify_qp_is_ok`): which attributes a transition requires and which it allows.
use crate::verbs::{QpAttrMask, QpState, QpType};

fn req_opt(cur: QpState, next: QpState, t: QpType) -> Option<(QpAttrMask, QpAttrMask)> {
    use QpAttrMask as M;
    use QpState::*;
    let e = M::EMPTY;
    let rc = t == QpType::Rc;
    let ud = t == QpType::Ud;
    let init_attrs = if ud {
        M::PKEY_INDEX | M::PORT | M::QKEY
    } else {
        M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS
    };
    Some(match (cur, next) {
        (_, Reset) | (_, Err) => (e, e),
        (Reset, Init) => (init_attrs, e),
        (Init, Init) => (e, init_attrs),
        (Init, Rtr) => {
            if ud {
                (e, M::PKEY_INDEX | M::QKEY)
            } else if rc {
                (
                    M::AV
                        | M::PATH_MTU
                        | M::DEST_QPN
                        | M::RQ_PSN
                        | M::MAX_DEST_RD_ATOMIC
                        | M::MIN_RNR_TIMER,
                    M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
                )
            } else {
                (
                    M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
                    M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
                )
            }
        }
        (Rtr, Rts) => {
            if ud {
                (M::SQ_PSN, M::CUR_STATE | M::QKEY)
            } else if rc {
                (
                    M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
                    M::CUR_STATE
                        | M::ALT_PATH
                        | M::ACCESS_FLAGS
                        | M::MIN_RNR_TIMER
                        | M::PATH_MIG_STATE,
                )
            } else {
                (
                    M::SQ_PSN,
                    M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
                )
            }
        }
        (Rts, Rts) | (Sqd, Rts) => {
            if ud {
                (e, M::CUR_STATE | M::QKEY)
            } else if rc {
                (
                    e,
                    M::CUR_STATE
                        | M::ACCESS_FLAGS
                        | M::ALT_PATH
                        | M::PATH_MIG_STATE
                        | M::MIN_RNR_TIMER,
                )
            } else {
                (
                    e,
                    M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE,
                )
            }
        }
        (Rts, Sqd) => (e, M::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Sqd) => {
            if ud {
                (e, M::PKEY_INDEX | M::QKEY)
            } else if rc {
                (
                    e,
                    M::PORT
                        | M::AV
                        | M::TIMEOUT
                        | M::RETRY_CNT
                        | M::RNR_RETRY
                        | M::MAX_QP_RD_ATOMIC
                        | M::MAX_DEST_RD_ATOMIC
                        | M::ALT_PATH
                        | M::ACCESS_FLAGS
                        | M::PKEY_INDEX
                        | M::MIN_RNR_TIMER
                        | M::PATH_MIG_STATE,
                )
            } else {
                (
                    e,
                    M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE,
                )
            }
        }
        (Sqe, Rts) if !rc => (
            e,
            if ud {
                M::CUR_STATE | M::QKEY
            } else {
                M::CUR_STATE | M::ACCESS_FLAGS
            },
        ),
        _ => return None,
    })
}

/// `ib_modify_qp_is_ok`: is `cur → next` legal with `mask`?
pub(crate) fn modify_is_ok(cur: QpState, next: QpState, t: QpType, mask: QpAttrMask) -> bool {
    let Some((req, opt)) = req_opt(cur, next, t) else {
        return false;
    };
    let allowed = req.0 | opt.0 | QpAttrMask::STATE.0;
    mask.contains(req) && mask.0 & !allowed == 0
}

#[cfg(test)]
mod test {
    use super::*;
    use QpAttrMask as M;

    #[test]
    fn modify_table_matches_ib_modify_qp_is_ok() {
        use QpState::*;
        let rc = QpType::Rc;
        assert!(modify_is_ok(
            Reset,
            Init,
            rc,
            M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS
        ));
        assert!(!modify_is_ok(
            Reset,
            Init,
            QpType::Ud,
            M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS
        ));
        assert!(modify_is_ok(
            Reset,
            Init,
            QpType::Ud,
            M::STATE | M::PKEY_INDEX | M::PORT | M::QKEY
        ));
        assert!(!modify_is_ok(
            Init,
            Rtr,
            rc,
            M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN
        ));
        assert!(modify_is_ok(
            Init,
            Rtr,
            QpType::Uc,
            M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN
        ));
        assert!(modify_is_ok(Init, Rtr, QpType::Ud, M::STATE));
        assert!(modify_is_ok(Rtr, Rts, QpType::Ud, M::STATE | M::SQ_PSN));
        assert!(!modify_is_ok(Rtr, Rts, rc, M::STATE | M::SQ_PSN));
        assert!(modify_is_ok(Rts, Rts, rc, M::MIN_RNR_TIMER));
        assert!(!modify_is_ok(Rts, Rts, QpType::Uc, M::MIN_RNR_TIMER));
        assert!(!modify_is_ok(Rtr, Rtr, rc, M::STATE));
        assert!(!modify_is_ok(Init, Rts, rc, M::STATE));
        assert!(!modify_is_ok(Err, Rts, rc, M::STATE));
        for s in [Reset, Init, Rtr, Rts, Sqd, Sqe, Err] {
            assert!(modify_is_ok(s, Err, rc, M::STATE));
            assert!(modify_is_ok(s, Reset, rc, M::STATE));
        }
        assert!(modify_is_ok(
            Rts,
            Sqd,
            rc,
            M::STATE | M::EN_SQD_ASYNC_NOTIFY
        ));
        assert!(modify_is_ok(
            Sqe,
            Rts,
            QpType::Uc,
            M::STATE | M::ACCESS_FLAGS
        ));
        assert!(!modify_is_ok(Sqe, Rts, rc, M::STATE | M::ACCESS_FLAGS));
    }
}

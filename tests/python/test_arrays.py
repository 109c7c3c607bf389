"""Forest.from_arrays: the flat builder, checked against XGBoost itself and by
hand, and refusing malformed arrays."""
import json

import numpy as np
import pytest
import xgboost as xgb

import pacset


def xgboost_trees(booster):
    """An XGBoost model's own arrays, as from_arrays takes them."""
    model = json.loads(booster.save_raw("json"))
    gb = model["learner"]["gradient_booster"]["model"]
    trees = []
    for tree, group in zip(gb["trees"], gb["tree_info"]):
        left = np.asarray(tree["left_children"], dtype=np.int32)
        trees.append({
            "left_child": left,
            "right_child": np.asarray(tree["right_children"], dtype=np.int64),
            "feature": np.asarray(tree["split_indices"], dtype=np.int32),
            "threshold": np.asarray(tree["split_conditions"], dtype=np.float32),
            "default_left": np.asarray(tree["default_left"], dtype=bool),
            # XGBoost keeps a leaf's value in split_conditions.
            "leaf_value": np.asarray(tree["split_conditions"], dtype=np.float32),
            "group": int(group),
        })
    return trees, float(model["learner"]["learner_model_param"]["base_score"])


def test_xgboost_arrays_rebuild_a_forest_that_predicts_xgboost_bit_for_bit(data):
    X, y = data
    booster = xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 5}, xgb.DMatrix(X, label=y), 10)
    trees, base = xgboost_trees(booster)
    forest = pacset.Forest.from_arrays(
        trees, num_features=X.shape[1], num_outputs=3, num_classes=3, task="multiclass",
        postprocess="softmax", base_score=base, decision="<", accumulate_precision="float32")
    rows = np.concatenate([X, X + 1e-7, np.full((1, X.shape[1]), np.nan)]).astype(np.float32)
    for t in trees[:5]:  # values exactly at thresholds: "<" must send them right
        internal = t["left_child"] >= 0
        for f, th in zip(t["feature"][internal], t["threshold"][internal]):
            r = X[:3].astype(np.float32).copy()
            r[:, f] = th
            rows = np.concatenate([rows, r])
    want = booster.inplace_predict(rows)
    got = forest.predict(rows)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert np.array_equal(forest.predict_margin(rows), booster.inplace_predict(rows, predict_type="margin"))


def stump(**extra):
    tree = {"left_child": [1, -1, -1], "right_child": [2, -1, -1], "feature": [0, 0, 0],
            "threshold": [0.5, 0, 0], "leaf_value": [0.0, -1.0, 1.0]}
    tree.update(extra)
    return tree


def test_decision_rule_and_default_direction():
    rows = np.array([[0.5], [np.nextafter(np.float32(0.5), np.float32(1))], [np.nan], [-np.inf]],
                    dtype=np.float32)
    le = pacset.Forest.from_arrays(stump(), num_features=1)
    assert le.predict(rows).tolist() == [-1.0, 1.0, 1.0, -1.0]  # NaN: right by default
    lt = pacset.Forest.from_arrays(stump(default_left=[True, False, False]), num_features=1,
                                   decision="<")
    assert lt.predict(rows).tolist() == [1.0, 1.0, -1.0, -1.0]  # 0.5 < 0.5 is false; NaN left
    # float64 inputs and a threshold float32 cannot hold: rounded exactly like the input.
    t = 0.1
    f64 = pacset.Forest.from_arrays(stump(threshold=[t, 0, 0]), num_features=1)
    x = np.array([[np.float32(t)], [np.nextafter(np.float32(t), np.float32(0))]])
    want = [1.0 if np.float32(v) > t else -1.0 for v in x[:, 0]]
    assert f64.predict(x).tolist() == want


def test_mean_aggregation_base_score_and_cardinality():
    trees = [stump(cardinality=[10, 7, 3]), stump(leaf_value=[0, 3.0, 5.0])]
    f = pacset.Forest.from_arrays(trees, num_features=1, aggregation="mean", base_score=2.0,
                                  layout="wdfs")
    assert f.predict(np.array([[0.0], [1.0]])).tolist() == [(2 - 1 + 3) / 2, (2 + 1 + 5) / 2]
    assert f.source["source_format"] == "arrays"


@pytest.mark.parametrize("change, words", [
    ({"left_child": [1, 5, -1]}, "left_child.*outside"),
    ({"right_child": [2, -1]}, "right_child.*expected 3 values"),
    ({"left_child": [1, -1, 1], "right_child": [2, -1, 1]}, "two parents|outside"),
    ({"left_child": [1, 2, -1], "right_child": [2, -1, -1]}, "one child|two parents"),
    ({"threshold": [np.nan, 0, 0]}, "NaN threshold"),
    ({"feature": [3, 0, 0]}, "feature outside"),
    ({"leaf_value": [0, np.nan, 1]}, "NaN value"),
    ({"left_child": [1.0, -1.0, -1.0]}, "expected integers"),
    ({"threshold": ["a", "b", "c"]}, "dtype"),
])
def test_malformed_arrays_are_value_errors(change, words):
    with pytest.raises(ValueError, match=words):
        pacset.Forest.from_arrays(stump(**change), num_features=1)


def test_bad_forest_parameters_are_value_errors():
    with pytest.raises(ValueError, match="postprocess"):
        pacset.Forest.from_arrays(stump(), num_features=1, postprocess="tanh")
    with pytest.raises(ValueError, match="decision"):
        pacset.Forest.from_arrays(stump(), num_features=1, decision=">")
    with pytest.raises(ValueError, match="group|output"):
        pacset.Forest.from_arrays(stump(group=2), num_features=1, num_outputs=2)
    with pytest.raises(ValueError, match="no trees"):
        pacset.Forest.from_arrays([], num_features=1)

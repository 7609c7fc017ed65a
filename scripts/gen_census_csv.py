#!/usr/bin/env python3
"""Writes a deterministic census-like CSV (UCI Adult's columns, synthetic
values) for bench/feature_columns and bench/peers/tf_feature_columns.py.
    python3 scripts/gen_census_csv.py OUT.csv [ROWS=100000]
Plain Python (random.Random(14)): the same file on every machine."""
import random
import sys

WORKCLASS = ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov", "Without-pay",
             "Never-worked"]
EDUCATION = ["Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
             "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"]
MARITAL = ["Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed", "Married-spouse-absent",
           "Married-AF-spouse"]
RELATIONSHIP = ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"]
OCCUPATION = ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
              "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
              "Priv-house-serv", "Protective-serv", "Armed-Forces"]
COUNTRY = ["United-States", "Mexico", "Philippines", "Germany", "Canada", "India", "England", "Cuba", "Jamaica",
           "South", "China", "Italy", "Dominican-Republic", "Vietnam", "Guatemala", "Japan", "Poland", "Columbia",
           "Taiwan", "Haiti", "Iran", "Portugal", "Nicaragua", "Peru", "Greece", "France", "Ecuador", "Ireland"]
HEADER = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation", "relationship",
          "capital_gain", "capital_loss", "hours_per_week", "native_country", "label"]


def main():
    out = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    r = random.Random(14)
    with open(out, "w") as f:
        f.write(",".join(HEADER) + "\n")
        for _ in range(rows):
            edu = r.randrange(len(EDUCATION))
            f.write("%d,%s,%d,%s,%d,%s,%s,%s,%d,%d,%d,%s,%d\n" % (
                r.randint(17, 90), r.choice(WORKCLASS), r.randint(12285, 1484705), EDUCATION[edu], edu + 1,
                r.choice(MARITAL), r.choice(OCCUPATION), r.choice(RELATIONSHIP),
                0 if r.random() < 0.9 else r.randint(1, 99999), 0 if r.random() < 0.95 else r.randint(1, 4356),
                r.randint(1, 99), COUNTRY[0] if r.random() < 0.8 else r.choice(COUNTRY), r.random() < 0.24))


if __name__ == "__main__":
    main()

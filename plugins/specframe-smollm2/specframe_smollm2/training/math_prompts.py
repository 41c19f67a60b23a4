"""Multi-step word problems of many shapes: the ``word_problem`` prompt kind of the stage-3 data.

The stage-1 templates (:func:`specframe_smollm2.training.prompts._math_prompt`) have fifteen shapes; their
prompts stay as they are so earlier data sections regenerate identically. This module adds problems of two to
four steps over shopping, work, travel, cooking, school, savings, sports and time, with fractions, percentages,
rates and ratios, and asks for the answer in the phrasings evaluation prompts use. No problem is copied from an
evaluation set; the recipes drop any prompt sharing a 10-word sequence with one.

Example::

    word_problem(random.Random(0))
    # 'Kenji runs a lemonade stand. On Saturday he sells 34 cups at $2 each ... How much profit does he make?'
"""

from __future__ import annotations

import random
from collections.abc import Callable

PEOPLE = [("Maya", "she", "her"), ("Liam", "he", "his"), ("Aisha", "she", "her"), ("Kenji", "he", "his"),
          ("Sofia", "she", "her"), ("Omar", "he", "his"), ("Priya", "she", "her"), ("Lucas", "he", "his"),
          ("Hana", "she", "her"), ("Diego", "he", "his"), ("Grace", "she", "her"), ("Ravi", "he", "his"),
          ("Elena", "she", "her"), ("Felix", "he", "his"), ("Mei", "she", "her"), ("Tariq", "he", "his"),
          ("Rosa", "she", "her"), ("Hugo", "he", "his"), ("Julia", "she", "her"), ("Ben", "he", "his")]
FOODS = ["muffins", "sandwiches", "pizzas", "pies", "cookies", "tacos", "pancakes", "dumplings", "bagels"]
ANIMALS = ["chickens", "goats", "cows", "rabbits", "ducks", "sheep", "horses", "pigs"]
SPORTS = ["basketball", "soccer", "volleyball", "baseball", "hockey", "tennis"]
STORES = ["grocery store", "bookstore", "hardware store", "toy shop", "bakery", "pet store", "garden center"]
SUFFIXES = ["", "", " Explain your reasoning.", " Show your steps.", " Think step by step.",
            " Please reason step by step, and put your final answer within \\boxed{}."]


def _problems(rng: random.Random) -> list[Callable[[], str]]:
    (a, he, his), (b, _, _) = rng.sample(PEOPLE, 2)
    n1, n2, n3, n4 = rng.randint(2, 12), rng.randint(10, 60), rng.randint(3, 25), rng.randint(2, 9)
    price = rng.choice([2, 3, 4, 5, 6, 8, 10, 12, 15, 20])
    pct = rng.choice([10, 15, 20, 25, 30, 40, 50, 60, 75])
    food, animals, sport, store = rng.choice(FOODS), rng.choice(ANIMALS), rng.choice(SPORTS), rng.choice(STORES)
    return [
        lambda: f"{a} runs a lemonade stand. On Saturday {he} sells {n2} cups at ${price} each, and on Sunday {he} "
                f"sells {n3} more cups than on Saturday. The lemons and sugar cost ${n1 * 5}. How much profit does "
                f"{a} make over the weekend?",
        lambda: f"A {store} has a {pct}% off sale. {a} buys {n1} items that normally cost ${price} each and one item "
                f"that normally costs ${n2}. How much does {a} pay after the discount?",
        lambda: f"{a} bakes {n1} trays of {food} with {n3} {food} on each tray. {he.capitalize()} sells {pct}% of "
                f"them and gives {n4} to {his} neighbors. How many {food} are left?",
        lambda: f"A farm has {n2} {animals}. The farmer buys {n3} more and then sells half of all the {animals}. "
                f"Each of the remaining {animals} eats {n4} pounds of feed a week. How much feed is needed per week?",
        lambda: f"{a} drives {n2} miles to work and back every day, {n4 + 1} days a week. {his.capitalize()} car "
                f"uses one gallon of gas every {n3 + 15} miles, and gas costs ${price / 2 + 1:.2f} a gallon. How "
                f"much does {a} spend on gas each week?",
        lambda: f"In a {sport} season, a team played {n2 + 10} games and won {pct}% of them. They lost {n4} games "
                f"and the rest were ties. How many games ended in a tie?",
        lambda: f"{a} has ${n2 * 10}. {he.capitalize()} spends a quarter of it on a jacket and then a third of "
                f"what is left on books. How much money does {a} have now?",
        lambda: f"{a} reads {n3} pages on Monday. Each day after that {he} reads {n4} pages more than the day "
                f"before. How many pages does {he} read from Monday to Friday?",
        lambda: f"A tank holds {n2 * 20} liters of water. It leaks {n4} liters every hour, and {a} adds {n1} "
                f"liters every {n4 + 1} hours. How much water is in the tank after {n4 + 1} hours?",
        lambda: f"The ratio of boys to girls in a club is {n4}:{n4 + 1}. There are {n4 * n1} boys. How many members "
                f"does the club have in total?",
        lambda: f"{a} and {b} share ${n2 * 12} in the ratio {n4}:{n1}. How much more does the one with the larger "
                f"share get?",
        lambda: f"A movie starts at {rng.randint(1, 9)}:{rng.choice(['00', '15', '30', '45'])} pm and lasts "
                f"{n3 + 80} minutes. {a} then walks home for {n3} minutes. At what time does {a} get home?",
        lambda: f"{a} earns ${n3 + 10} an hour and works {n1 + 20} hours a week. {he.capitalize()} pays {pct}% of "
                f"{his} pay in taxes and saves half of the rest. How much does {he} save in {n4} weeks?",
        lambda: f"A school orders {n1} boxes of pencils with {n2} pencils in each box. The pencils are shared "
                f"equally among {n4 + 2} classes. How many pencils does each class get, and how many are left "
                f"over?",
        lambda: f"{a} is {n3} years old. {b}'s age is {n4} years more than twice {a}'s age. How old will {b} be "
                f"in {n1} years?",
        lambda: f"A recipe for {n4 * 2} servings needs {n1} eggs and {n4} cups of milk. {a} wants to make "
                f"{n4 * 6} servings. How many eggs and cups of milk does {he} need?",
        lambda: f"{a} buys {n1} notebooks for ${price} each and {n3} pens for ${price / 4:.2f} each. "
                f"{he.capitalize()} pays with a ${(n1 * price + n3 * price // 4) // 10 * 10 + 20} bill. How much "
                f"change does {he} get?",
        lambda: f"A cyclist rides at {n3 + 8} km per hour for {n4} hours, rests for an hour, and then rides "
                f"{n2} km more at {n3 + 5} km per hour. How long does the whole trip take?",
        lambda: f"{a} plants {n1} rows of tomatoes with {n3} plants in each row. Each plant gives {n4} kilograms "
                f"of tomatoes, and {a} sells them for ${price} per kilogram. How much money does {a} make?",
        lambda: f"A phone plan costs ${n2} a month plus ${price / 10:.2f} for every minute over {n3 * 10} minutes. "
                f"{a} talked for {n3 * 10 + n2} minutes this month. What is {his} bill?",
        lambda: f"There are {n2 + 30} marbles in a jar: {n3} are red, twice as many are blue, and the rest are "
                f"green. What fraction of the marbles are green?",
        lambda: f"{a} saves ${n4} in the first week, and every week {he} saves ${n4} more than the week before. "
                f"How much has {he} saved after {n1} weeks?",
        lambda: f"A store sells {food} for ${price} each or a pack of {n4 + 2} for ${price * (n4 + 1)}. "
                f"{a} needs {n4 * 5 + 10} {food}. What is the cheapest way to buy them, and what does it cost?",
        lambda: f"{a} scored {n2 + 30}, {n2 + 35} and {n2 + 25} on three tests. What score does {he} need on "
                f"the fourth test to have an average of {n2 + 33}?",
        lambda: f"A painter can paint {n4} rooms in {n1 + 2} days. At the same rate, how many days does {he} "
                f"need to paint {n4 * 4} rooms, working only on weekdays, if {he} starts on a Monday?",
        lambda: f"{a} has {n2} stamps and {b} has {n3} fewer than {a}. {b} then buys {n1} packs of {n4} stamps. "
                f"Who has more stamps now, and by how many?",
        lambda: f"The price of a bike was ${n2 * 10}. It went up by {pct}% in the spring and then down by "
                f"{pct // 5 + 5}% in the fall. What is the price now?",
        lambda: f"A rectangle is {n3} cm long and {n4} cm wide. A square has the same perimeter. What is the "
                f"area of the square?",
    ]


def word_problem(rng: random.Random) -> str:
    """One multi-step word problem with a randomly chosen answer instruction."""
    return rng.choice(_problems(rng))() + rng.choice(SUFFIXES)

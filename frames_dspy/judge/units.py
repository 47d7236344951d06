"""Units and scale words as answers write them, and how units of one kind convert.

Each canonical unit has a dimension (``length``, ``calendar``, ``money:USD``...), a factor to the
dimension's base unit, and a system. Units of one dimension and system convert exactly (1 km is
1000 m, 1 year is 12 months); across systems (metres and feet) an answer is usually rounded, so
:func:`frames_dspy.judge.answer_forms.compare_quantities` never compares across them. Months and
years do not convert to days exactly, so ``calendar`` and ``duration`` are separate dimensions.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = [
    "UNITS",
    "UNIT_WORDS",
    "ATTACHED_UNITS",
    "CURRENCY_PREFIX",
    "SCALES",
    "SCALE_ABBREVIATIONS",
    "ROUGHLY",
    "BOUNDS",
    "unit_of",
]

# canonical name -> (dimension, factor to the dimension's base unit, system)
UNITS: dict[str, tuple[str, Decimal, str]] = {
    "second": ("duration", Decimal(1), ""),
    "minute": ("duration", Decimal(60), ""),
    "hour": ("duration", Decimal(3600), ""),
    "day": ("duration", Decimal(86400), ""),
    "week": ("duration", Decimal(604800), ""),
    "month": ("calendar", Decimal(1), ""),
    "year": ("calendar", Decimal(12), ""),
    "decade": ("calendar", Decimal(120), ""),
    "century": ("calendar", Decimal(1200), ""),
    "millennium": ("calendar", Decimal(12000), ""),
    "mm": ("length", Decimal("0.001"), "metric"),
    "cm": ("length", Decimal("0.01"), "metric"),
    "m": ("length", Decimal(1), "metric"),
    "km": ("length", Decimal(1000), "metric"),
    "inch": ("length", Decimal("0.0254"), "imperial"),
    "ft": ("length", Decimal("0.3048"), "imperial"),
    "yard": ("length", Decimal("0.9144"), "imperial"),
    "mile": ("length", Decimal("1609.344"), "imperial"),
    "mg": ("mass", Decimal("0.000001"), "metric"),
    "g": ("mass", Decimal("0.001"), "metric"),
    "kg": ("mass", Decimal(1), "metric"),
    "tonne": ("mass", Decimal(1000), "metric"),
    "lb": ("mass", Decimal("0.45359237"), "imperial"),
    "oz": ("mass", Decimal("0.028349523125"), "imperial"),
    "hectare": ("area", Decimal(10000), "metric"),
    "km2": ("area", Decimal(1000000), "metric"),
    "acre": ("area", Decimal("4046.8564224"), "imperial"),
    "sq mile": ("area", Decimal("2589988.110336"), "imperial"),
    "m/s": ("speed", Decimal(1), "metric"),
    "km/h": ("speed", Decimal(1) / Decimal("3.6"), "metric"),
    "mph": ("speed", Decimal("0.44704"), "imperial"),
    "cubic ft/s": ("flow", Decimal(1), "imperial"),
    "celsius": ("temperature:c", Decimal(1), ""),
    "fahrenheit": ("temperature:f", Decimal(1), ""),
    "percent": ("percent", Decimal(1), ""),
    "USD": ("money:USD", Decimal(1), ""),
    "GBP": ("money:GBP", Decimal(1), ""),
    "EUR": ("money:EUR", Decimal(1), ""),
    "JPY": ("money:JPY", Decimal(1), ""),
}

# Spellings after a number, longest first so "cubic feet per second" wins over "feet".
UNIT_WORDS: dict[str, str] = {
    "seconds": "second", "second": "second", "secs": "second", "sec": "second",
    "minutes": "minute", "minute": "minute", "mins": "minute", "min": "minute",
    "hours": "hour", "hour": "hour", "hrs": "hour", "hr": "hour",
    "days": "day", "day": "day", "weeks": "week", "week": "week",
    "months": "month", "month": "month",
    "years": "year", "year": "year", "yrs": "year", "yr": "year",
    "decades": "decade", "decade": "decade",
    "centuries": "century", "century": "century",
    "millennia": "millennium", "millennium": "millennium",
    "millimetres": "mm", "millimeters": "mm", "millimetre": "mm", "millimeter": "mm", "mm": "mm",
    "centimetres": "cm", "centimeters": "cm", "centimetre": "cm", "centimeter": "cm", "cm": "cm",
    "kilometres": "km", "kilometers": "km", "kilometre": "km", "kilometer": "km", "km": "km",
    "metres": "m", "meters": "m", "metre": "m", "meter": "m", "m": "m",
    "inches": "inch", "inch": "inch",
    "feet": "ft", "foot": "ft", "ft": "ft", "yards": "yard", "yard": "yard", "yd": "yard",
    "miles": "mile", "mile": "mile", "mi": "mile",
    "milligrams": "mg", "milligram": "mg", "mg": "mg", "grams": "g", "gram": "g", "g": "g",
    "kilograms": "kg", "kilogram": "kg", "kg": "kg", "tonnes": "tonne", "tonne": "tonne",
    "lbs": "lb", "lb": "lb", "ounces": "oz", "ounce": "oz", "oz": "oz",
    "hectares": "hectare", "hectare": "hectare", "ha": "hectare",
    "square kilometres": "km2", "square kilometers": "km2", "sq km": "km2", "km2": "km2",
    "acres": "acre", "acre": "acre",
    "square miles": "sq mile", "square mile": "sq mile", "sq mi": "sq mile",
    "metres per second": "m/s", "meters per second": "m/s", "m/s": "m/s",
    "kilometres per hour": "km/h", "kilometers per hour": "km/h", "km/h": "km/h", "kph": "km/h",
    "miles per hour": "mph", "mph": "mph",
    "cubic feet per second": "cubic ft/s", "cubic ft/s": "cubic ft/s", "cfs": "cubic ft/s",
    "degrees celsius": "celsius", "celsius": "celsius", "degrees fahrenheit": "fahrenheit",
    "fahrenheit": "fahrenheit",
    "percentage points": "percent", "per cent": "percent", "percent": "percent", "%": "percent",
    "us dollars": "USD", "dollars": "USD", "usd": "USD", "pounds sterling": "GBP",
    "gbp": "GBP", "euros": "EUR", "eur": "EUR", "yen": "JPY",
}  # fmt: skip
# Letters written straight after the digits ("11cm", "-63C", "$1.2bn").
ATTACHED_UNITS = {
    "mm": "mm", "cm": "cm", "km": "km", "m": "m", "ft": "ft", "kg": "kg", "g": "g",
    "mi": "mile", "c": "celsius", "f": "fahrenheit", "%": "percent", "lbs": "lb", "lb": "lb",
}  # fmt: skip
CURRENCY_PREFIX = {"us$": "USD", "$": "USD", "£": "GBP", "€": "EUR", "¥": "JPY"}
SCALES = {
    "thousand": Decimal(10**3),
    "million": Decimal(10**6),
    "billion": Decimal(10**9),
    "trillion": Decimal(10**12),
}
SCALE_ABBREVIATIONS = {"k": "thousand", "m": "million", "mn": "million", "bn": "billion"}
# Before a number: about/approximately make it a rounded value; "over", "at least" and the like
# make it a bound, which is neither the gold value nor a different one.
ROUGHLY = ("about", "approximately", "approx.", "approx", "around", "roughly", "some", "~")
BOUNDS = (
    "more than", "over", "less than", "under", "at least", "at most", "nearly", "almost",
    "up to", "just over", "just under", "fewer than", "upwards of", "below", "above", "over",
)  # fmt: skip


def unit_of(word: str) -> str | None:
    """The canonical unit a spelling names ("kilometres" -> "km"), or None."""
    return UNIT_WORDS.get(word.strip().casefold())

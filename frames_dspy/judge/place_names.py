"""Names of countries and first-level regions, to read "Prague, Czech Republic" as one answer.

A gold answer such as "Seattle, Washington" names one place and locates it; the part after the
comma is not a second answer that a response must repeat. The rules in
:mod:`frames_dspy.judge.rules` treat a trailing comma part as such a qualifier only when it is in
this list: sovereign states (with common short forms), US states with their postal codes,
Canadian provinces and territories, Australian states, and the UK's nations.
"""

from __future__ import annotations

__all__ = ["is_place_name"]

_COUNTRIES = """
Afghanistan|Albania|Algeria|Andorra|Angola|Antigua and Barbuda|Argentina|Armenia|Australia|
Austria|Azerbaijan|Bahamas|Bahrain|Bangladesh|Barbados|Belarus|Belgium|Belize|Benin|Bhutan|
Bolivia|Bosnia and Herzegovina|Botswana|Brazil|Brunei|Bulgaria|Burkina Faso|Burundi|Cambodia|
Cameroon|Canada|Cape Verde|Central African Republic|Chad|Chile|China|Colombia|Comoros|Congo|
Costa Rica|Croatia|Cuba|Cyprus|Czech Republic|Czechia|Denmark|Djibouti|Dominica|
Dominican Republic|East Timor|Ecuador|Egypt|El Salvador|Equatorial Guinea|Eritrea|Estonia|
Eswatini|Ethiopia|Fiji|Finland|France|Gabon|Gambia|Georgia|Germany|Ghana|Greece|Grenada|
Guatemala|Guinea|Guinea-Bissau|Guyana|Haiti|Honduras|Hungary|Iceland|India|Indonesia|Iran|
Iraq|Ireland|Israel|Italy|Ivory Coast|Jamaica|Japan|Jordan|Kazakhstan|Kenya|Kiribati|Kosovo|
Kuwait|Kyrgyzstan|Laos|Latvia|Lebanon|Lesotho|Liberia|Libya|Liechtenstein|Lithuania|
Luxembourg|Madagascar|Malawi|Malaysia|Maldives|Mali|Malta|Marshall Islands|Mauritania|
Mauritius|Mexico|Micronesia|Moldova|Monaco|Mongolia|Montenegro|Morocco|Mozambique|Myanmar|
Namibia|Nauru|Nepal|Netherlands|New Zealand|Nicaragua|Niger|Nigeria|North Korea|
North Macedonia|Norway|Oman|Pakistan|Palau|Palestine|Panama|Papua New Guinea|Paraguay|Peru|
Philippines|Poland|Portugal|Qatar|Romania|Russia|Rwanda|Saint Lucia|Samoa|San Marino|
Saudi Arabia|Senegal|Serbia|Seychelles|Sierra Leone|Singapore|Slovakia|Slovenia|
Solomon Islands|Somalia|South Africa|South Korea|South Sudan|Spain|Sri Lanka|Sudan|Suriname|
Sweden|Switzerland|Syria|Taiwan|Tajikistan|Tanzania|Thailand|Togo|Tonga|Trinidad and Tobago|
Tunisia|Turkey|Turkmenistan|Tuvalu|Uganda|Ukraine|United Arab Emirates|United Kingdom|UK|
United States|United States of America|USA|US|U.S.|U.S.A.|Uruguay|Uzbekistan|Vanuatu|
Vatican City|Venezuela|Vietnam|Yemen|Zambia|Zimbabwe|England|Scotland|Wales|Northern Ireland|
Great Britain|Britain
"""
_REGIONS = """
Alabama|Alaska|Arizona|Arkansas|California|Colorado|Connecticut|Delaware|Florida|Georgia|
Hawaii|Idaho|Illinois|Indiana|Iowa|Kansas|Kentucky|Louisiana|Maine|Maryland|Massachusetts|
Michigan|Minnesota|Mississippi|Missouri|Montana|Nebraska|Nevada|New Hampshire|New Jersey|
New Mexico|New York|North Carolina|North Dakota|Ohio|Oklahoma|Oregon|Pennsylvania|
Rhode Island|South Carolina|South Dakota|Tennessee|Texas|Utah|Vermont|Virginia|Washington|
West Virginia|Wisconsin|Wyoming|District of Columbia|D.C.|DC|
AL|AK|AZ|AR|CA|CO|CT|DE|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|NJ|NM|
NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY|
Alberta|British Columbia|Manitoba|New Brunswick|Newfoundland and Labrador|Nova Scotia|Ontario|
Prince Edward Island|Quebec|Saskatchewan|Yukon|Northwest Territories|Nunavut|
New South Wales|Queensland|South Australia|Tasmania|Victoria|Western Australia
"""


def _names(block: str) -> frozenset[str]:
    return frozenset(n.strip().casefold() for n in block.replace("\n", "").split("|") if n.strip())


_PLACES = _names(_COUNTRIES) | _names(_REGIONS)


def is_place_name(text: str) -> bool:
    """Whether ``text`` (case-insensitive, "the" ignored) names a country or first-level region.

    Two-letter postal codes count only in capitals ("CA", not "ca"), so ordinary words such as
    "in", "or" and "me" are never read as places.
    """
    name = " ".join(str(text).split())
    if len(name) <= 3 and name.isalpha() and not name.isupper():
        return False
    name = name.casefold()
    if name.startswith("the "):
        name = name[4:]
    return name in _PLACES

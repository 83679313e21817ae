"""What a people is called -> its place ("German" -> "Germany"), lower case, single words.

Headlines say "Germany reopens shops" and "German states ease rules" about one event; the story
step's name keys (:func:`newsflow.dedup.story_features.name_keys`) count both as one name. Countries and
regions that make news in English-language feeds; a name missing here only means the two forms
count as two names.
"""

from __future__ import annotations

__all__ = ["DEMONYMS"]

_PAIRS = """
afghan afghanistan african africa albanian albania algerian algeria american america
argentine argentina argentinian argentina armenian armenia asian asia australian australia
austrian austria bangladeshi bangladesh belarusian belarus belgian belgium bolivian bolivia
bosnian bosnia brazilian brazil british britain briton britain bulgarian bulgaria
burmese myanmar cambodian cambodia cameroonian cameroon canadian canada chilean chile
chinese china colombian colombia congolese congo croatian croatia cuban cuba cypriot cyprus
czech czechia danish denmark dane denmark dutch netherlands ecuadorian ecuador egyptian egypt
emirati emirates english england eritrean eritrea estonian estonia ethiopian ethiopia
european europe filipino philippines finnish finland finn finland french france
georgian georgia german germany ghanaian ghana greek greece guatemalan guatemala haitian haiti
honduran honduras hungarian hungary icelandic iceland indian india indonesian indonesia
iranian iran iraqi iraq irish ireland israeli israel italian italy ivorian ivory
jamaican jamaica japanese japan jordanian jordan kazakh kazakhstan kenyan kenya korean korea
kosovar kosovo kurdish kurdistan kuwaiti kuwait kyrgyz kyrgyzstan latvian latvia
lebanese lebanon liberian liberia libyan libya lithuanian lithuania malaysian malaysia
malian mali maltese malta mexican mexico moldovan moldova mongolian mongolia
moroccan morocco mozambican mozambique namibian namibia nepalese nepal nepali nepal
nicaraguan nicaragua nigerian nigeria nigerien niger norwegian norway omani oman
pakistani pakistan palestinian palestine panamanian panama paraguayan paraguay peruvian peru
polish poland portuguese portugal qatari qatar romanian romania russian russia rwandan rwanda
scottish scotland scot scotland senegalese senegal serbian serbia serb serbia
singaporean singapore slovak slovakia slovenian slovenia somali somalia
spanish spain sudanese sudan swedish sweden swede sweden swiss switzerland
syrian syria taiwanese taiwan tajik tajikistan tanzanian tanzania thai thailand
tibetan tibet tunisian tunisia turkish turkey turk turkey ugandan uganda ukrainian ukraine
uruguayan uruguay uzbek uzbekistan venezuelan venezuela vietnamese vietnam welsh wales
yemeni yemen zambian zambia zimbabwean zimbabwe
californian california texan texas floridian florida
"""

_WORDS = _PAIRS.split()
DEMONYMS: dict[str, str] = dict(zip(_WORDS[::2], _WORDS[1::2], strict=True))
